import Depot
import DepotTesting
import Foundation
import GRDB
import Testing
@testable import DepotStore

@Suite struct BulkUpsertTests {
    /// A cached article: the server owns its title and body, and its date
    /// when it sends one; the user owns the star.
    struct Article: Codable, Hashable, Sendable, FetchableRecord, PersistableRecord {
        var id: Int
        var title: String
        var body: String?
        var published: String?
        var isStarred = false

        static let databaseTableName = "article"

        enum Columns {
            static let body = Column("body")
            static let published = Column("published")
            static let isStarred = Column("isStarred")
        }
    }

    /// A database with the `article` table, and `log`, which a trigger
    /// fills with each article row SQLite really updates.
    func database(_ articles: [Article] = []) throws -> DatabaseQueue {
        let queue = try DatabaseQueue()
        try queue.write { db in
            try db.create(table: "article") { t in
                t.primaryKey("id", .integer)
                t.column("title", .text).notNull()
                t.column("body", .text)
                t.column("published", .text)
                t.column("isStarred", .boolean).notNull().defaults(to: false)
            }
            try db.execute(sql: "CREATE TABLE log (id INTEGER)")
            try db.execute(sql: "CREATE TRIGGER logUpdates AFTER UPDATE ON article BEGIN INSERT INTO log (id) VALUES (NEW.id); END")
            for article in articles { try article.insert(db) }
        }
        return queue
    }

    func upsert(_ batches: [[Article]], in queue: DatabaseQueue, keepingWhenNull: [any ColumnExpression] = [Article.Columns.published]) throws -> BulkUpsert<Article>.Counts {
        try queue.write { db in
            var upsert = try BulkUpsert<Article>(db, keeping: [Article.Columns.isStarred], keepingWhenNull: keepingWhenNull)
            for batch in batches { try upsert.write(batch) }
            return try upsert.finish()
        }
    }

    func articles(in queue: DatabaseQueue) throws -> [Article] {
        try queue.read { db in try Article.order(Column("id")).fetchAll(db) }
    }

    func updatedIDs(in queue: DatabaseQueue) throws -> [Int] {
        try queue.read { db in try Int.fetchAll(db, sql: "SELECT id FROM log ORDER BY id") }
    }

    @Test func aKnownRowTakesTheNewValuesAndKeepsItsLocalColumns() throws {
        // Given two articles, the first starred
        let queue = try database([
            Article(id: 1, title: "One", body: "b1", isStarred: true),
            Article(id: 2, title: "Two", body: "b2"),
        ])

        // When the server sends both changed, unstarred, and a new starred one
        let counts = try upsert([[
            Article(id: 1, title: "One, edited", body: nil),
            Article(id: 2, title: "Two, edited", body: "b2"),
            Article(id: 3, title: "Three", isStarred: true),
        ]], in: queue)

        // Then the known rows take the server's values but keep their stars, and the new one is inserted whole
        #expect(try articles(in: queue) == [
            Article(id: 1, title: "One, edited", body: nil, isStarred: true),
            Article(id: 2, title: "Two, edited", body: "b2"),
            Article(id: 3, title: "Three", isStarred: true),
        ])
        #expect(counts == .init(inserted: 1, updated: 2, unchanged: 0))
        #expect(counts.description == "1 new, 2 updated, 0 unchanged")
    }

    @Test func aColumnKeptWhenNullStaysUntilAValueComes() throws {
        let queue = try database([Article(id: 1, title: "One", published: "2020-01-01")])

        // When the server stops sending the date, the known one stays and nothing is written
        #expect(try upsert([[Article(id: 1, title: "One")]], in: queue) == .init(inserted: 0, updated: 0, unchanged: 1))
        #expect(try articles(in: queue).first?.published == "2020-01-01")

        // When it sends another, the row takes it
        #expect(try upsert([[Article(id: 1, title: "One", published: "2021-02-02")]], in: queue) == .init(inserted: 0, updated: 1, unchanged: 0))
        #expect(try articles(in: queue).first?.published == "2021-02-02")

        // And a column not named is overwritten, NULL or not
        #expect(try upsert([[Article(id: 1, title: "One")]], in: queue, keepingWhenNull: []) == .init(inserted: 0, updated: 1, unchanged: 0))
        #expect(try articles(in: queue).first?.published == nil)
    }

    @Test func aRowThatWouldNotChangeIsNotWritten() throws {
        // Given three articles, one starred
        let queue = try database((1...3).map { Article(id: $0, title: "T\($0)", isStarred: $0 == 2) })

        // When the same three come again (the star aside), and one of them changed
        let counts = try upsert([(1...3).map { Article(id: $0, title: $0 == 3 ? "New" : "T\($0)") }], in: queue)

        // Then SQLite updated only that one row
        #expect(counts == .init(inserted: 0, updated: 1, unchanged: 2))
        #expect(try updatedIDs(in: queue) == [3])
    }

    /// The first listing of a key is the one written, whether the key is new
    /// or known, in one write or a later one, into an empty table or not.
    @Test(arguments: [false, true])
    func aKeyListedTwiceIsWrittenOnceTheFirstTime(tableHadRows: Bool) throws {
        let queue = try database(tableHadRows ? [Article(id: 1, title: "Old one"), Article(id: 100, title: "Other")] : [])
        let counts = try upsert([
            // Four rows: one statement, the repeat inside it
            [Article(id: 1, title: "First"), Article(id: 1, title: "First again"), Article(id: 2, title: "Second"), Article(id: 4, title: "Fourth")],
            [Article(id: 2, title: "Second again"), Article(id: 3, title: "Third")],
        ], in: queue)

        let titles = try articles(in: queue).filter { $0.id < 100 }.map(\.title)
        #expect(titles == ["First", "Second", "Third", "Fourth"])
        #expect(counts == (tableHadRows ? .init(inserted: 3, updated: 1, unchanged: 0) : .init(inserted: 4, updated: 0, unchanged: 0)))
        #expect(try updatedIDs(in: queue) == (tableHadRows ? [1] : []))
    }

    /// Statements bind up to 64 rows, in chunks of a power of two: none, one,
    /// exactly one full statement, one more than that, and many.
    @Test(arguments: [0, 1, 63, 64, 65, 200])
    func everyRecordIsWrittenWhateverTheCount(count: Int) throws {
        #expect(BulkUpsertEncoder<Article>.maximumRowsPerStatement == 64)
        // Into an empty table
        let empty = try database()
        #expect(try upsert([(0..<count).map { Article(id: $0, title: "T\($0)") }], in: empty) == .init(inserted: count, updated: 0, unchanged: 0))
        #expect(try articles(in: empty) == (0..<count).map { Article(id: $0, title: "T\($0)") })

        // Into a table that has every other row, half of them starred and stale
        let known = (0..<count).filter { $0.isMultiple(of: 2) }
        let queue = try database(known.map { Article(id: $0, title: $0.isMultiple(of: 4) ? "Stale" : "T\($0)", isStarred: true) })
        let counts = try upsert([(0..<count).map { Article(id: $0, title: "T\($0)") }], in: queue)
        let stale = known.filter { $0.isMultiple(of: 4) }
        #expect(counts == .init(inserted: count - known.count, updated: stale.count, unchanged: known.count - stale.count))
        #expect(try articles(in: queue) == (0..<count).map { Article(id: $0, title: "T\($0)", isStarred: $0.isMultiple(of: 2)) })
        #expect(try updatedIDs(in: queue) == stale)
    }

    @Test func aFailureInALaterStatementRollsTheTransactionBack() throws {
        // Given one known article
        let queue = try database([Article(id: 1, title: "Kept", isStarred: true)])
        try queue.write { db in try db.execute(sql: "CREATE TRIGGER refuse BEFORE INSERT ON article WHEN NEW.id = 70 BEGIN SELECT RAISE(ABORT, 'no 70'); END") }

        // When 100 articles come, the 70th refused: the first statement of 64 rows went in
        let error = #expect(throws: DatabaseError.self) {
            try upsert([(1...100).map { Article(id: $0, title: "New \($0)") }], in: queue)
        }

        // Then the whole transaction rolled back
        #expect(error?.message == "no 70")
        #expect(try articles(in: queue) == [Article(id: 1, title: "Kept", isStarred: true)])
        #expect(try updatedIDs(in: queue).isEmpty)
    }

    @Test func recordsMadeOnAnotherThreadAreWrittenInOrder() throws {
        let queue = try database([Article(id: 5, title: "Old", isStarred: true)])
        let seen = try queue.write { db in
            var upsert = try BulkUpsert<Article>(db, keeping: [Article.Columns.isStarred])
            var seen: [[Int]] = []
            try upsert.write(from: { yield in
                for start in stride(from: 0, to: 300, by: 100) {
                    try yield((start..<start + 100).map { Article(id: $0 % 250, title: "T\($0)") })
                }
            }, beforeEachBatch: { articles in seen.append([articles.first!.id, articles.count]) })
            #expect(try upsert.finish() == .init(inserted: 249, updated: 1, unchanged: 0))
            return seen
        }
        #expect(seen == [[0, 100], [100, 100], [200, 100]])
        let rows = try articles(in: queue)
        #expect(rows.count == 250)
        #expect(rows.allSatisfy { $0.title == "T\($0.id)" })
        #expect(rows.first { $0.id == 5 }?.isStarred == true)
    }

    @Test func aProducerFailureAfterSomeBatchesRollsBack() throws {
        struct Broken: Error {}
        let queue = try database([Article(id: 1, title: "Kept")])
        #expect(throws: Broken.self) {
            try queue.write { db in
                var upsert = try BulkUpsert<Article>(db)
                try upsert.write(from: { yield in
                    try yield((1...200).map { Article(id: $0, title: "New") })
                    throw Broken()
                })
            }
        }
        #expect(try articles(in: queue) == [Article(id: 1, title: "Kept")])
    }

    @Test func anUnknownColumnIsRefusedAtTheStart() throws {
        let queue = try database()
        let error = #expect(throws: DatabaseError.self) {
            try queue.write { db in _ = try BulkUpsert<Article>(db, keeping: [Column("isFavourite")]) }
        }
        #expect(error?.message?.contains("isFavourite") == true)
    }

    // MARK: - Records that list their columns in order

    /// An article that gives its values in a fixed order, as a feed item does.
    struct OrderedArticle: BulkEncodableRecord, FetchableRecord, Sendable {
        var article: Article
        var valueCount = 5

        static let databaseTableName = "article"
        static let encodedColumns = [Column("id"), Column("title"), Column("body"), Column("published"), Column("isStarred")]

        func encodeValues(into values: inout [DatabaseValue]) {
            let all = [article.id.databaseValue, article.title.databaseValue, article.body.databaseValue,
                       article.published.databaseValue, article.isStarred.databaseValue]
            values.append(contentsOf: all.prefix(valueCount))
        }

        func encode(to container: inout PersistenceContainer) { encodeColumns(to: &container) }

        init(row: GRDB.Row) throws { article = try Article(row: row) }
        init(_ article: Article, valueCount: Int = 5) {
            self.article = article
            self.valueCount = valueCount
        }
    }

    @Test func aRecordInColumnOrderIsWrittenAsAnyOther() throws {
        // Given every other article known, starred, half of them stale
        let queue = try database((0..<65).filter { $0.isMultiple(of: 2) }.map { Article(id: $0, title: $0.isMultiple(of: 4) ? "Stale" : "T\($0)", isStarred: true) })

        // When 65 come, unstarred, one of them twice
        let counts = try queue.write { db in
            var upsert = try BulkUpsert<OrderedArticle>(db, keeping: [Article.Columns.isStarred])
            try upsert.write((0..<65).map { OrderedArticle(Article(id: $0, title: "T\($0)")) } + [OrderedArticle(Article(id: 3, title: "Again"))])
            return try upsert.finish()
        }

        // Then it is the same upsert: stars kept, the first listing wins, unchanged rows not written
        #expect(counts == .init(inserted: 32, updated: 17, unchanged: 16))
        #expect(try articles(in: queue) == (0..<65).map { Article(id: $0, title: "T\($0)", isStarred: $0.isMultiple(of: 2)) })
        #expect(try updatedIDs(in: queue) == (0..<65).filter { $0.isMultiple(of: 4) })
        // And encode(to:) gives the same row as the ordered values
        #expect(try OrderedArticle(Article(id: 1, title: "T", body: "b")).databaseDictionary == Article(id: 1, title: "T", body: "b").databaseDictionary)
    }

    @Test func aRecordThatGivesTooFewValuesIsRefused() throws {
        let queue = try database()
        #expect(throws: DatabaseError.self) {
            try queue.write { db in
                var upsert = try BulkUpsert<OrderedArticle>(db)
                try upsert.write([OrderedArticle(Article(id: 1, title: "T"), valueCount: 4)])
            }
        }
        #expect(try articles(in: queue).isEmpty)
    }

    // MARK: - Values every row shares

    /// An entry of a list: the key is the list and the id, and a sync writes one list.
    struct Entry: Codable, Hashable, Sendable, FetchableRecord, PersistableRecord {
        var list: String
        var id: Int
        var title: String
    }

    @Test func aKeyPartEveryRowSharesStillMatchesAndSkipsRepeats() throws {
        // Given list "a" with entries 0 to 9 and list "b" with entry 0
        let queue = try DatabaseQueue()
        try queue.write { db in
            try db.create(table: "entry") { t in
                t.column("list", .text).notNull()
                t.column("id", .integer).notNull()
                t.column("title", .text).notNull()
                t.primaryKey(["list", "id"])
            }
            for id in 0..<10 { try Entry(list: "a", id: id, title: "Old").insert(db) }
            try Entry(list: "b", id: 0, title: "Other list").insert(db)
        }

        // When list "a" comes with 40 entries, then again with 20 of them retitled
        let counts = try queue.write { db in
            var upsert = try BulkUpsert<Entry>(db)
            try upsert.write((0..<40).map { Entry(list: "a", id: $0, title: "New \($0)") })
            try upsert.write((0..<20).map { Entry(list: "a", id: $0, title: "Again") })
            return try upsert.finish()
        }

        // Then each entry of "a" has its first listing, and "b" is untouched
        #expect(counts == .init(inserted: 30, updated: 10, unchanged: 0))
        let entries = try queue.read { db in try Entry.order(Column("list"), Column("id")).fetchAll(db) }
        #expect(entries == (0..<40).map { Entry(list: "a", id: $0, title: "New \($0)") } + [Entry(list: "b", id: 0, title: "Other list")])
    }

    @Test func aBatchOfOneRecordRepeatedIsWrittenOnce() throws {
        let queue = try database()
        let counts = try upsert([Array(repeating: Article(id: 1, title: "Same"), count: 20)], in: queue)
        #expect(counts == .init(inserted: 1, updated: 0, unchanged: 0))
        #expect(try articles(in: queue) == [Article(id: 1, title: "Same")])
    }

    @Test func aValueOnlySomeRowsShareIsBoundForEachRow() throws {
        // The first rows agree on the title and the body, the later ones do not
        let batch = (0..<20).map { Article(id: $0, title: $0 < 2 ? "Same" : "T\($0)", body: $0 < 19 ? "b" : nil) }
        let queue = try database()
        #expect(try upsert([batch], in: queue) == .init(inserted: 20, updated: 0, unchanged: 0))
        #expect(try articles(in: queue) == batch)
    }
}
