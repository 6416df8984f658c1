import Depot
import DepotStore
import GRDB

/// The Senbei cache's schema: the `entity`, `entityPage`, `comment`, `task` and
/// `activity` tables, and for changes made here (see ``SenbeiMutation``) the
/// `pending` column of `entity`, `comment` and `task` and the `rejectedChange`
/// table. The outbox's own table is created by the store.
///
/// For example:
///
/// ```swift
/// let store = try Store(path: cacheFile.path, migrator: SenbeiSchema.migrator)
/// var configuration = NetworkController.Configuration(baseURL: server, transport: transport)
/// configuration.store = store
/// ```
public enum SenbeiSchema {
    /// The migrations that create (and later evolve) the Senbei tables.
    public static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("senbei-v1") { db in
            try db.create(table: Entity.databaseTableName) { t in
                t.column("kind", .text).notNull()
                t.column("id", .integer).notNull()
                t.column("name", .text).notNull()
                t.column("email", .text)
                t.column("company", .text)
                t.column("page", .integer)
                t.column("position", .integer).notNull()
                t.primaryKey(["kind", "id"])
            }
            // Serves Entity.onPage(_:_:) without a sort step.
            try db.execute(sql: "CREATE INDEX entity_byPage ON entity(kind, page, position, id)")
            try db.create(table: PageInfo.databaseTableName) { t in
                t.column("kind", .text).notNull()
                t.column("page", .integer).notNull()
                t.column("perPage", .integer).notNull()
                t.column("total", .integer).notNull()
                t.primaryKey(["kind", "page"])
            }
            try db.create(table: CRMComment.databaseTableName) { t in
                t.primaryKey("id", .integer)
                t.column("commentableType", .text).notNull()
                t.column("commentableId", .integer).notNull()
                t.column("text", .text).notNull()
            }
            try db.execute(sql: "CREATE INDEX comment_bySubject ON comment(commentableType, commentableId, id)")
            try db.create(table: CRMTask.databaseTableName) { t in
                t.primaryKey("id", .integer)
                t.column("name", .text).notNull()
                t.column("due", .text)
                t.column("completed", .boolean).notNull().defaults(to: false)
            }
            try db.create(table: CRMActivity.databaseTableName) { t in
                t.primaryKey("id", .integer)
                t.column("action", .text).notNull()
                t.column("subject", .text).notNull()
                t.column("position", .integer).notNull().indexed()
            }
        }
        // Changes go through the outbox: a row the user created or changed here
        // says so (`pending`) until the server's answer replaces or undoes it, and a
        // change the server refused is kept with its reason until it was shown.
        migrator.registerMigration("senbei-v2-outbox") { db in
            for table in [Entity.databaseTableName, CRMComment.databaseTableName, CRMTask.databaseTableName] {
                try db.alter(table: table) { t in t.add(column: "pending", .text) }
            }
            try db.create(table: RejectedChange.databaseTableName) { t in
                t.primaryKey("id", .integer)
                t.column("summary", .text).notNull()
                t.column("reason", .text).notNull()
            }
        }
        // Contacts are edited here from the version the cache holds: the
        // version and the phone (a field an edit can set) are kept with the row.
        migrator.registerMigration("senbei-v3-versions") { db in
            try db.alter(table: Entity.databaseTableName) { t in
                t.add(column: "phone", .text)
                t.add(column: "version", .integer)
            }
        }
        return migrator
    }
}
