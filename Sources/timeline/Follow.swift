import Depot
import DepotStore
import ExampleSupport
import Foundation
import SyncStatusText
import TimelineKit

/// `timeline --follow`: prints each change as it reaches the cache, like
/// `tail -f`, from the cursor kept in the cache (a first run starts after the
/// current timeline). States go to standard error, changes to standard output.
@MainActor
enum Follow {
    /// Follows until the process is stopped.
    static func run(_ feed: LiveFeed<TimelineFeed>, json: Bool) async {
        let events = feed.events()
        let states = feed.status.updates()
        let watch = feed.watch()
        defer { watch.cancel() }
        let reporter = Task {
            var last: LiveState?
            // The first state is the one before watching began: not news.
            var first = true
            for await state in states {
                if first {
                    first = false
                    continue
                }
                guard let live = state.live, live != last else { continue }
                last = live
                if case .catchingUp(let count) = live, count > 0 { continue }  // the count is for screens
                ExampleSupport.write(["timeline: \(live)"], to: .standardError)
            }
        }
        defer { reporter.cancel() }
        for await event in events {
            switch event {
            case .applied(let changes):
                ExampleSupport.write(changes.map { json ? jsonLine($0) : textLine($0) })
            case .replaced:
                break  // a full sync: where following starts, not news
            case .skipped(let error):
                ExampleSupport.write(["timeline: skipped an event: \(error.plainFailure(app: "timeline").clause)"], to: .standardError)
            }
        }
    }

    /// `post 31 @joeconway: Shipped it.` or `delete 31`.
    static func textLine(_ change: TimelineChange) -> String {
        switch change {
        case .post(let post): "post \(post.id) @\(post.author): \(post.text)"
        case .delete(let id): "delete \(id)"
        }
    }

    /// `{"change":"post","id":31,"author":"joeconway","text":"Shipped it."}`
    /// or `{"change":"delete","id":31}`: keys in this order, strings escaped by JSON.
    static func jsonLine(_ change: TimelineChange) -> String {
        switch change {
        case .post(let post): #"{"change":"post","id":\#(post.id),"author":\#(quoted(post.author)),"text":\#(quoted(post.text))}"#
        case .delete(let id): #"{"change":"delete","id":\#(id)}"#
        }
    }

    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return encoder
    }()

    private static func quoted(_ text: String) -> String {
        // Encoding a String cannot fail.
        (try? encoder.encode(text)).map { String(decoding: $0, as: UTF8.self) } ?? "\"\""
    }
}
