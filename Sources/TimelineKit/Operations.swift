import Depot
import DepotStore
import Foundation
import GRDB

extension OperationCategory {
    /// The timeline's own requests.
    public static let timeline: OperationCategory = "timeline"
    /// Posts going out.
    public static let posts: OperationCategory = "posts"
}

/// Fetches the newest posts (`GET timeline?limit=N`) and merges them into the
/// `post` table. High priority: it is what the user is looking at.
///
/// For example:
///
/// ```swift
/// let update = try await controller.perform(FetchTimeline())
/// print(update.written ?? 0, "new posts")
/// ```
public struct FetchTimeline: CachingOperation {
    /// How many posts to ask for (the server accepts 1 to 200).
    public var limit: Int
    /// Wait for the network while offline (the default for GET), or fail at once.
    public var offlineBehavior: OfflineBehavior

    /// Makes the operation for the newest `limit` posts.
    ///
    /// - Parameters:
    ///   - limit: How many posts to ask for.
    ///   - offlineBehavior: `.failFast` for a one-shot run that must not wait for the network.
    public init(limit: Int = 50, offlineBehavior: OfflineBehavior = .waitForConnectivity) {
        self.limit = limit
        self.offlineBehavior = offlineBehavior
    }

    /// `GET timeline?limit=N`.
    public var request: NetworkRequest { .get("timeline", query: ["limit": "\(limit)"]) }
    /// `timeline`: one timeline in the cache.
    public var cacheKey: String { "timeline" }
    /// `.high`: the timeline comes before everything but posting.
    public var priority: Priority { .high }
    /// ``OperationCategory/timeline``.
    public var category: OperationCategory { .timeline }

    /// Decodes the JSON array of posts.
    public func parse(_ response: NetworkResponse, context: OperationContext) async throws -> [TimelinePost] {
        try response.decode([TimelinePost].self)
    }

    /// Inserts new posts and updates changed ones; posts no longer listed stay.
    /// - Returns: How many posts were new.
    public func write(_ posts: [TimelinePost], to db: Database) throws -> Int {
        var inserted = 0
        for post in posts {
            if try TimelinePost.exists(db, key: post.id) {
                try post.update(db)
            } else {
                try post.insert(db)
                inserted += 1
            }
        }
        return inserted
    }
}

/// Fetches one avatar (`GET /avatars/N.png`) into the `avatar` table.
///
/// Low priority in the `images` category, and droppable: on a poor link the
/// controller pauses images, and the default ``QualityRules`` drop queued
/// avatars (``TimelineApp/qualityRules`` keeps them queued instead).
public struct FetchAvatar: CachingOperation {
    /// The avatar's path on the server, such as `/avatars/3.png`.
    public var path: String

    /// Makes the operation for the avatar at `path`.
    public init(path: String) {
        self.path = path
    }

    /// `GET` of the path.
    public var request: NetworkRequest { .get(path) }
    /// `avatar:` and the path.
    public var cacheKey: String { "avatar:\(path)" }
    /// `.low`: avatars can wait.
    public var priority: Priority { .low }
    /// `.images`, which the quality rules pause on a poor link.
    public var category: OperationCategory { .images }
    /// `true`: a queued avatar may be dropped on a poor link.
    public var isDroppable: Bool { true }

    /// The PNG signature every avatar must start with.
    static let pngSignature = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])

    /// Checks that the body is a PNG file.
    public func parse(_ response: NetworkResponse, context: OperationContext) async throws -> Data {
        guard response.body.starts(with: Self.pngSignature) else {
            throw DepotError(.decoding, operation: name, status: response.status, detail: "\(path) is not a PNG file")
        }
        return response.body
    }

    /// Stores the image under its path.
    public func write(_ png: Data, to db: Database) throws {
        try AvatarImage(path: path, png: png).save(db)
    }
}

/// Posts to the timeline (`POST posts`) through the outbox: durable before
/// it is sent, shown at once as a pending row, delivered exactly once.
///
/// ``applyOptimistically(_:)`` writes a ``PendingPost``; the server's answer
/// replaces it with the ``TimelinePost`` in one transaction (the list shows
/// the post move, not vanish and come back), and a refusal (a 422: "text
/// must be 1 to 280 characters") keeps it, marked with the reason. Posts go
/// in one lane, in the order written, at very high priority.
///
/// For example:
///
/// ```swift
/// let outbox = Outbox(store: store, controller: controller, types: [CreatePost.self])
/// let ticket = try await outbox.send(CreatePost(text: "Posting from the tunnel.", author: "you"))
/// ```
public struct CreatePost: Mutation {
    /// What is stored in the outbox, and rebuilt on a later launch.
    public struct Payload: Codable, Sendable, Hashable {
        /// The pending row's id.
        public var localID: String
        /// The text.
        public var text: String
        /// The author's handle.
        public var author: String
    }

    /// The stored name. A payload change that old rows cannot decode gets a new name.
    public static let typeName = "CreatePost"
    /// The stored payload.
    public var payload: Payload

    /// Rebuilds a stored post.
    public init(payload: Payload) {
        self.payload = payload
    }

    /// A new post.
    ///
    /// - Parameters:
    ///   - text: The post's text (1 to 280 characters; the server says so with a 422).
    ///   - author: The author's handle.
    ///   - localID: The pending row's id; a new one by default.
    public init(text: String, author: String = "you", localID: String = UUID().uuidString) {
        payload = Payload(localID: localID, text: text, author: author)
    }

    struct Body: Encodable, Sendable {
        var text: String
        var author: String
    }

    /// Every post in one lane: they reach the server in the order written.
    public var lane: String { "posts" }
    /// `POST posts` with the JSON body (the outbox adds the `Idempotency-Key`).
    public var request: NetworkRequest { .post("posts", json: Body(text: payload.text, author: payload.author)) }
    /// `.veryHigh`: what the user wrote goes first.
    public var priority: Priority { .veryHigh }
    /// ``OperationCategory/posts``.
    public var category: OperationCategory { .posts }

    /// The pending row (kept as it is if it is there already: the outbox
    /// applies this again after every refresh).
    public func applyOptimistically(_ db: Database) throws {
        try db.execute(
            sql: "INSERT INTO \(PendingPost.databaseTableName) (id, author, text) VALUES (?, ?, ?) ON CONFLICT(id) DO NOTHING",
            arguments: [payload.localID, payload.author, payload.text])
    }

    /// The server's post replaces the pending row.
    public func commit(_ response: NetworkResponse, _ db: Database) throws {
        let post = try response.decode(TimelinePost.self)
        _ = try PendingPost.deleteOne(db, key: payload.localID)
        try post.save(db)
    }

    /// The pending row stays, marked with the server's reason.
    public func rollback(_ error: DepotError, _ db: Database) throws {
        let reason = TimelinePresentation.rejectionReason(error)
        try db.execute(sql: "UPDATE \(PendingPost.databaseTableName) SET rejection = ? WHERE id = ?", arguments: [reason, payload.localID])
    }

    /// A 422 says why in the server's words, such as "text must be 1 to 280
    /// characters"; other statuses as usual.
    public func error(for response: NetworkResponse) -> DepotError {
        if response.status == 422, let message = ValidationMessage(response.body) {
            return DepotError(.unexpectedStatus, operation: Self.typeName, status: 422, bodyExcerpt: message.text)
        }
        return DepotError.forStatus(response.status, body: response.body, operation: Self.typeName)
    }
}

/// The message of a 422 body `{"errors": {"field": ["message", …]}}`: "field message".
struct ValidationMessage {
    var text: String

    init?(_ body: Data) {
        struct Errors: Decodable { var errors: [String: [String]] }
        guard let errors = try? JSONDecoder().decode(Errors.self, from: body).errors, !errors.isEmpty else { return nil }
        text = errors.sorted { $0.key < $1.key }
            .flatMap { field, messages in messages.map { "\(field) \($0)" } }
            .joined(separator: "; ")
    }
}
