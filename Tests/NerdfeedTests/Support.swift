import Depot
import DepotStore
import Foundation
import GRDB
import NerdfeedKit
import Synchronization

/// The committed fixture `name` (in `Fixtures/`).
func fixture(_ name: String) throws -> URL {
    guard let folder = Bundle.module.url(forResource: "Fixtures", withExtension: nil) else {
        throw DepotError(.invalidRequest, detail: "the Fixtures folder is missing from the test bundle")
    }
    return folder.appending(path: name)
}

/// The bytes of the committed fixture `name`.
func fixtureData(_ name: String) throws -> Data {
    try Data(contentsOf: fixture(name))
}

/// An instant written in RFC 3339, for expectations.
func utc(_ text: String) -> Date {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = text.contains(".") ? [.withInternetDateTime, .withFractionalSeconds] : [.withInternetDateTime]
    guard let date = formatter.date(from: text) else { fatalError("bad test date \(text)") }
    return date
}

/// The URL the RSS fixtures pretend to come from.
let forumFeedURL = URL(string: "https://forums.example.com/feeds/rss.xml")!

/// Counts calls from any thread.
final class Counter: Sendable {
    private let count = Mutex(0)
    var value: Int { count.withLock { $0 } }
    func increment() { count.withLock { $0 += 1 } }
}

extension Store {
    /// Every feed item, by link.
    func allItems() async throws -> [FeedItem] {
        try await read { db in try FeedItem.order(FeedItem.Columns.id).fetchAll(db) }
    }

    /// The item with this link.
    func item(_ link: String) async throws -> FeedItem? {
        try await read { db in try FeedItem.fetchOne(db, key: link) }
    }
}
