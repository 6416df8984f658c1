import Depot
import DepotStore
import Foundation
import GRDB

// Sources/Depot/Depot.docc/OfflineWrites.md

enum OfflineWritesExamples {
    struct PostRow: Codable, Sendable, FetchableRecord, PersistableRecord {
        var localID: String
        var serverID: Int?
        var text: String
        var isPending: Bool
    }

    struct SentPost: Decodable, Sendable {
        var id: Int
        var text: String
    }

    struct SendPost: Mutation {
        struct Payload: Codable, Sendable {
            var localID: String
            var text: String
        }

        static let typeName = "SendPost.v1"
        var payload: Payload
        init(payload: Payload) { self.payload = payload }

        var lane: String { "posts" }
        var request: NetworkRequest { .post("posts", json: ["text": payload.text]) }

        func applyOptimistically(_ db: Database) throws {
            try PostRow(localID: payload.localID, serverID: nil, text: payload.text, isPending: true).upsert(db)
        }

        func commit(_ response: NetworkResponse, _ db: Database) throws {
            let sent = try response.decode(SentPost.self)
            try PostRow(localID: payload.localID, serverID: sent.id, text: sent.text, isPending: false).upsert(db)
        }

        func rollback(_ error: DepotError, _ db: Database) throws {
            _ = try PostRow.deleteOne(db, key: payload.localID)
        }
    }

    static func sendAndFollow(store: Store, controller: NetworkController) async throws -> Result<NetworkResponse, DepotError> {
        let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
        try await outbox.start()                                    // what earlier launches left
        let ticket = try await outbox.send(SendPost(payload: .init(localID: "local-1", text: "hi")))
        let status = await OutboxStatus(outbox: outbox)             // @Observable: pending, sending, failures
        let answer = await ticket.outcome()                         // when it matters
        _ = status
        return answer
    }

    static func exit(controller: NetworkController, store: Store) async throws {
        _ = await controller.shutdown(grace: .seconds(5))
        try await store.close()
    }
}
