import DemoServer
import Depot
import DepotAsyncHTTPClient
import DepotTesting
import Foundation
import GRDB
import Testing
@testable import DepotStore

/// A full disk: the file capped at its size (`PRAGMA max_page_count` on the
/// writer's connection), so that SQLite answers `SQLITE_FULL` as it does when
/// the disk has no room left, then given room again.
extension OutboxTests {
    /// A post with an attachment: its optimistic row or its commit needs far
    /// more pages than a full file has left.
    struct SendBulkyPost: Mutation {
        struct Payload: Codable, Sendable {
            var localID: String
            var text: String
            /// Where the 256 KB attachment is written: before sending, or at the commit.
            var attachAt: String
        }

        static let typeName = "SendBulkyPost.v1"
        var payload: Payload
        init(payload: Payload) { self.payload = payload }
        init(_ localID: String, _ text: String, attachAt: String) { payload = Payload(localID: localID, text: text, attachAt: attachAt) }

        var lane: String { "posts" }
        var request: NetworkRequest { .post("posts", json: ["text": payload.text]) }

        func applyOptimistically(_ db: Database) throws {
            try PostRow(localID: payload.localID, serverID: nil, text: payload.text, isPending: true).upsert(db)
            if payload.attachAt == "enqueue" { try Self.attach(payload.localID, db) }
        }

        func commit(_ response: NetworkResponse, _ db: Database) throws {
            struct Sent: Decodable { var id: Int; var text: String }
            let sent = try response.decode(Sent.self)
            try PostRow(localID: payload.localID, serverID: sent.id, text: sent.text, isPending: false).update(db)
            if payload.attachAt == "commit" { try Self.attach(payload.localID, db) }
        }

        func rollback(_ error: DepotError, _ db: Database) throws {
            _ = try PostRow.deleteOne(db, key: payload.localID)
        }

        static func attach(_ localID: String, _ db: Database) throws {
            try db.execute(sql: "CREATE TABLE IF NOT EXISTS attachment (localID TEXT PRIMARY KEY, bytes BLOB NOT NULL)")
            try db.execute(sql: "INSERT INTO attachment VALUES (?, ?)", arguments: [localID, Data(repeating: 7, count: 256 * 1_024)])
        }
    }

    /// Caps the file at its size plus `slack` pages: a small write still fits, a 256 KB one does not.
    static func fill(_ store: Store, slack: Int = 0) async throws {
        try await store.writer.writeWithoutTransaction { db in
            let pages = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
            try db.execute(sql: "PRAGMA max_page_count = \(pages + slack)")
        }
    }

    /// Space is back.
    static func free(_ store: Store) async throws {
        try await store.writer.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA max_page_count = 1073741823") }
    }

    /// An enqueue that the full disk refuses throws `.diskFull` and leaves
    /// nothing: no entry, no optimistic row; what was queued before stays,
    /// and goes out once there is room.
    @Test func anEnqueueOnAFullDiskThrowsDiskFullAndLeavesNothing() async throws {
        try await withSetup { setup in
            let store = try setup.store()
            let controller = setup.offlineController(store: store)
            let outbox = Outbox(store: store, controller: controller, types: [SendPost.self, SendBulkyPost.self], waitsForNetwork: false)
            // Given a post queued while offline
            try await outbox.send(SendPost("local-1", "queued before"))
            await outbox.waitUntilIdle()
            try await Self.fill(store)

            // When a post whose optimistic change needs room is sent
            let error = await #expect(throws: DepotError.self) {
                try await outbox.send(SendBulkyPost("local-2", "too big for the disk", attachAt: "enqueue"))
            }

            // Then it says the disk is full, and nothing of it was written
            #expect(error?.storageProblem == .diskFull)
            #expect(try await outbox.entries().map(\.typeName) == [SendPost.typeName])
            #expect(try await Self.rows(store).map(\.localID) == ["local-1"])
            try await Self.quit(controller, outbox, closing: store)
        }
    }

    /// The server accepts a post, but its commit finds the disk full: the
    /// entry stays pending (not failed), whole. With room again, the next
    /// start sends it with the same key, the server replays its answer, and
    /// the commit lands once: one post on the server, one row here.
    @Test func aCommitOnAFullDiskLeavesTheEntryPendingAndItGoesThroughOnceWithRoom() async throws {
        try await DemoServer.withRunning(.init(port: 0)) { server in
            try await withSetup { setup in
                let store = try setup.store()
                let controller = setup.controller(AsyncHTTPClientTransport(), baseURL: server.baseURL, store: store)
                // A one-shot tool's outbox: an attempt without a decision stops the lane.
                let outbox = Outbox(store: store, controller: controller, types: [SendBulkyPost.self], waitsForNetwork: false)
                let text = "accepted while the disk was full"
                // Given a disk with room for the entry, not for its commit
                try await Self.fill(store, slack: 16)

                // When the post goes out and the server accepts it
                let ticket = try await outbox.send(SendBulkyPost("local-1", text, attachAt: "commit"))
                await outbox.waitUntilIdle()

                // Then the entry is still pending, as it was, and the row still pending
                let entries = try await outbox.entries()
                #expect(entries.map(\.state) == [.pending], "\(entries)")
                #expect(try await Self.rows(store).map(\.isPending) == [true])
                #expect(try await Self.serverPosts(server, controller: controller, texts: [text]).count == 1)

                // When there is room again and the outbox starts
                try await Self.free(store)
                try await outbox.start()
                let response = try await ticket.outcome().get()

                // Then the server's replayed answer is committed, once
                #expect(response.headers["Idempotent-Replayed"] == "true")
                #expect(try await outbox.entries().isEmpty)
                let posts = try await Self.serverPosts(server, controller: controller, texts: [text])
                #expect(posts.count == 1)
                #expect(try await Self.rows(store) == [PostRow(localID: "local-1", serverID: posts.keys.first, text: text, isPending: false)])
                try await Self.quit(controller, outbox, closing: store)
            }
        }
    }
}
