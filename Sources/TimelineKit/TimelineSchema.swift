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

/// A row of the timeline as the view shows it: the post, and whether its
/// avatar is in the cache yet.
public struct TimelineEntry: Codable, Sendable, Hashable, Identifiable, FetchableRecord {
    /// The post's id.
    public var id: Int
    /// The author's handle.
    public var author: String
    /// The text.
    public var text: String
    /// The avatar's path.
    public var avatar: String
    /// The avatar's size in bytes, or `nil` while it is not cached.
    public var avatarBytes: Int?

    /// Whether the avatar is cached.
    public var hasAvatar: Bool { avatarBytes != nil }

    /// The newest `limit` posts, newest first, each with its avatar's state.
    /// The request reads both tables, so a newly cached avatar updates its rows.
    public static func newestFirst(limit: Int = 200) -> SQLRequest<TimelineEntry> {
        SQLRequest(sql: """
            SELECT post.id, post.author, post.text, post.avatar, length(avatar.png) AS avatarBytes
            FROM post LEFT JOIN avatar ON avatar.id = post.avatar
            ORDER BY post.id DESC LIMIT ?
            """, arguments: [limit])
    }
}

/// The Timeline cache's schema: the `post` and `avatar` tables.
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
        return migrator
    }
}
