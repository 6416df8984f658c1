import Depot
import DepotStore
import Foundation
import GRDB

// Sources/DepotStore/DepotStore.docc/LiveData.md.

struct Message: Codable, Sendable, Identifiable, Equatable, FetchableRecord, PersistableRecord {
    var id: Int
    var text: String
}

struct ChangesPage: Decodable {
    struct Change: Decodable {
        var seq: Int
        var message: Message?
        var id: Int?

        var change: MessageChange { message.map(MessageChange.write) ?? .delete(id: id ?? 0) }
    }

    var changes: [Change]
    var cursor: Int
    var more: Bool
}

struct Deleted: Decodable {
    var id: Int
}

enum MessageChange: Sendable {
    case write(Message)
    case delete(id: Int)
}

struct MessagesFeed: ChangeFeed {
    var syncKey: String { "messages" }
    var snapshotRequest: NetworkRequest { .get("messages") }
    var eventsRequest: NetworkRequest? { .get("messages/events") }

    func changesRequest(after cursor: String) -> NetworkRequest {
        .get("messages/changes", query: ["since": cursor])
    }

    func decodeSnapshot(_ response: NetworkResponse) throws -> ChangePage<MessageChange> {
        let messages = try response.decode([Message].self)
        return ChangePage(messages.map(MessageChange.write), cursor: response.headers["Change-Cursor"] ?? "0")
    }

    func decodeChanges(_ response: NetworkResponse) throws -> ChangePage<MessageChange> {
        let page = try response.decode(ChangesPage.self)
        return ChangePage(page.changes.map(\.change), cursor: String(page.cursor), more: page.more)
    }

    func decodeEvent(_ event: ServerSentEvent) throws -> LiveMessage<MessageChange> {
        let data = Data(event.data.utf8)
        switch event.type {
        case "message": return .changes([.write(try JSONDecoder().decode(Message.self, from: data))])
        case "delete": return .changes([.delete(id: try JSONDecoder().decode(Deleted.self, from: data).id)])
        case "stale": return .invalidate([.tag(event.data)])
        case "reset": return .startOver
        default: return .ignore
        }
    }

    func apply(_ change: MessageChange, to db: Database) throws {
        switch change {
        case .write(let message): try message.save(db)
        case .delete(let id): _ = try Message.deleteOne(db, key: id)
        }
    }

    func removeAll(from db: Database) throws {
        _ = try Message.deleteAll(db)
    }
}

enum LiveDataExamples {
    @MainActor
    static func keepLive(controller: NetworkController, store: Store) async throws {
        let feed = try LiveFeed(MessagesFeed(), controller: controller)
        let messages = try ResultsController(store: store, request: Message.order(Column("id").desc))
        let watch = feed.watch()
        print(feed.status.live ?? .upToDate)   // connecting, live, catching up, offline

        for await event in feed.events() {
            if case .applied(let changes) = event {
                print(changes.count, "changes landed")
            }
        }
        watch.cancel()
        _ = messages
    }
}
