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

/// Posts to the timeline (`POST posts`), and puts the new post in the cache.
///
/// Posting must go out: very high priority, exit policy `.finish` (a quit lets
/// it complete within the grace period), and an `Idempotency-Key`. The key makes
/// a retry after a lost connection safe (the server answers it with the first
/// response instead of posting again), so this operation retries POST, which
/// Depot does not do by default. Two operations with the same key coalesce into
/// one request: a double press posts once.
///
/// For example:
///
/// ```swift
/// let draft = CreatePost(text: "Posting from the tunnel.", idempotencyKey: UUID().uuidString)
/// let post = try await controller.perform(draft)   // keep the key to send it again
/// ```
public struct CreatePost: NetworkOperation {
    /// The text.
    public var text: String
    /// The author's handle.
    public var author: String
    /// The key that makes the request safe to repeat; one per draft.
    public var idempotencyKey: String

    /// Makes the operation for one draft.
    ///
    /// - Parameters:
    ///   - text: The post's text (1 to 280 characters; the server says so with a 422).
    ///   - author: The author's handle.
    ///   - idempotencyKey: A key unique to this draft. Keep it for a second
    ///     press of the same draft; a new draft gets a new key.
    public init(text: String, author: String = "you", idempotencyKey: String) {
        self.text = text
        self.author = author
        self.idempotencyKey = idempotencyKey
    }

    struct Body: Encodable, Sendable {
        var text: String
        var author: String
    }

    /// `POST posts` with the JSON body and the `Idempotency-Key` header.
    public var request: NetworkRequest {
        .post("posts", json: Body(text: text, author: author), headers: ["Idempotency-Key": idempotencyKey])
    }
    /// `.veryHigh`: what the user wrote goes first.
    public var priority: Priority { .veryHigh }
    /// ``OperationCategory/posts``.
    public var category: OperationCategory { .posts }
    /// `.finish`: a post in flight is not abandoned at exit.
    public var exitPolicy: ExitPolicy { .finish }
    /// One request per idempotency key.
    public var coalescing: Coalescing { .key("POST posts \(idempotencyKey)") }
    /// POST is retried, because the key makes it safe: lost connections, and the
    /// usual statuses plus 409 (the server still has the first try in flight).
    public var retryPolicy: RetryPolicy? {
        RetryPolicy(maximumAttempts: 4, methods: [.post], statuses: [408, 409, 429, 502, 503, 504])
    }

    /// 2xx passes; a 422 becomes an error with the server's message, such as
    /// "text must be 1 to 280 characters"; other statuses as usual.
    public func validate(_ response: NetworkResponse) throws {
        if response.status == 422, let message = ValidationMessage(response.body) {
            throw DepotError(.unexpectedStatus, operation: name, status: 422, bodyExcerpt: message.text)
        }
        guard (200..<300).contains(response.status) else {
            throw DepotError.forStatus(response.status, body: response.body, operation: name)
        }
    }

    /// Decodes the created post and puts it in the cache, so the timeline shows it at once.
    public func process(_ response: NetworkResponse, context: OperationContext) async throws -> TimelinePost {
        let post = try response.decode(TimelinePost.self)
        if let store = context.store {
            try await store.write { db in try post.save(db) }
        }
        return post
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
