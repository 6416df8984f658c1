import DepotStore
import Foundation
import GRDB

/// A post on the timeline, as cached.
public struct TimelinePost: Codable, Sendable, Hashable, Identifiable, FetchableRecord, PersistableRecord {
    /// The server's id; newer posts have larger ids.
    public var id: Int
    /// The author's handle.
    public var author: String
    /// The text, at most 280 characters.
    public var text: String
    /// The author's avatar: a path on the server, such as `/avatars/3.png`.
    public var avatar: String

    /// Makes a post.
    public init(id: Int, author: String, text: String, avatar: String) {
        self.id = id
        self.author = author
        self.text = text
        self.avatar = avatar
    }

    /// The `post` table.
    public static let databaseTableName = "post"
}

/// An avatar image, cached by its path.
public struct AvatarImage: Codable, Sendable, Hashable, Identifiable, FetchableRecord, PersistableRecord {
    /// The path it was fetched from, such as `/avatars/3.png`.
    public var id: String
    /// The PNG file.
    public var png: Data

    /// Makes an avatar record.
    public init(path: String, png: Data) {
        self.id = path
        self.png = png
    }

    /// The `avatar` table.
    public static let databaseTableName = "avatar"
}

/// A post written here that the server has not accepted yet: shown at once,
/// marked pending, until the outbox's answer replaces it with the server's
/// post, or marks it rejected with the reason.
public struct PendingPost: Codable, Sendable, Hashable, Identifiable, FetchableRecord, PersistableRecord {
    /// The local id the post was written under (the mutation's payload has it).
    public var id: String
    /// The author's handle.
    public var author: String
    /// The text.
    public var text: String
    /// Why the server refused it, once it did; `nil` while it waits or goes out.
    public var rejection: String?

    /// Makes a pending post.
    public init(id: String, author: String, text: String, rejection: String? = nil) {
        self.id = id
        self.author = author
        self.text = text
        self.rejection = rejection
    }

    /// The `pendingPost` table.
    public static let databaseTableName = "pendingPost"
}

/// A row of the timeline as the view shows it: the post, and whether its
/// avatar is in the cache yet.
public struct TimelineEntry: Codable, Sendable, Hashable, Identifiable, FetchableRecord {
    /// The post's id; negative for a pending post (its row's number, negated).
    public var id: Int
    /// The author's handle.
    public var author: String
    /// The text.
    public var text: String
    /// The avatar's path.
    public var avatar: String
    /// The avatar's size in bytes, or `nil` while it is not cached.
    public var avatarBytes: Int?

    /// Whether it is a post written here that the server has not accepted yet.
    public var isPending: Bool
    /// Why the server refused a pending post, once it did.
    public var rejection: String?

    /// Whether the avatar is cached.
    public var hasAvatar: Bool { avatarBytes != nil }

    /// The newest `limit` rows, newest first: the pending posts written here
    /// on top, then the server's posts, each with its avatar's state. The
    /// request reads every table involved, so a newly cached avatar, a post
    /// written or one accepted updates the rows.
    public static func newestFirst(limit: Int = 200) -> SQLRequest<TimelineEntry> {
        SQLRequest(sql: """
            SELECT id, author, text, avatar, avatarBytes, isPending, rejection FROM (
                SELECT -pendingPost.rowid AS id, author, text, '' AS avatar, NULL AS avatarBytes,
                       1 AS isPending, rejection, pendingPost.rowid AS sortKey
                FROM pendingPost
                UNION ALL
                SELECT post.id, post.author, post.text, post.avatar, length(avatar.png),
                       0, NULL, post.id
                FROM post LEFT JOIN avatar ON avatar.id = post.avatar
            )
            ORDER BY isPending DESC, sortKey DESC LIMIT ?
            """, arguments: [limit])
    }
}

/// The Timeline cache's schema: the `post`, `avatar` and `pendingPost` tables.
///
/// For example:
///
/// ```swift
/// var configuration = NetworkController.Configuration(baseURL: server, transport: transport)
/// configuration.store = try Store(path: cacheFile.path, migrator: TimelineSchema.migrator)
/// ```
public enum TimelineSchema {
    /// The migrations that create (and later evolve) the Timeline tables.
    public static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("timeline-v1") { db in
            try db.create(table: TimelinePost.databaseTableName) { t in
                t.primaryKey("id", .integer)
                t.column("author", .text).notNull()
                t.column("text", .text).notNull()
                t.column("avatar", .text).notNull()
            }
            try db.create(table: AvatarImage.databaseTableName) { t in
                t.primaryKey("id", .text)
                t.column("png", .blob).notNull()
            }
        }
        migrator.registerMigration("timeline-v2-pending-posts") { db in
            try db.create(table: PendingPost.databaseTableName) { t in
                t.primaryKey("id", .text)
                t.column("author", .text).notNull()
                t.column("text", .text).notNull()
                t.column("rejection", .text)
            }
        }
        return migrator
    }
}
