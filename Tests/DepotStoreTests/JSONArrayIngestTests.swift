import Depot
import DepotTesting
import Foundation
import GRDB
import Testing
@testable import DepotStore

@Suite struct JSONArrayIngestTests {
    struct Thing: Codable, Equatable, Sendable {
        var id: Int
        var text: String
        var tags: [String]
    }

    func things(_ count: Int) -> [Thing] {
        // Strings full of the characters the splitter must not be fooled by.
        (0..<count).map { Thing(id: $0, text: #"a, "quoted" [bracket] {brace} \ back\slash, ü"# + "\($0)", tags: ["x,y", "]"]) }
    }

    func ingest(_ data: Data, chunkSize: Int) throws -> [Thing] {
        let queue = try DatabaseQueue()
        var collected: [Thing] = []
        _ = try queue.write { db in
            try JSONArrayIngest.decode(Thing.self, from: data, chunkSize: chunkSize, into: db) { _, chunk in collected += chunk }
        }
        return collected
    }

    @Test(arguments: [1, 2, 7, 1000, 5000])
    func chunksReassembleTheWholeArray(chunkSize: Int) throws {
        let all = things(1234)
        let data = try JSONEncoder().encode(all)
        #expect(try ingest(data, chunkSize: chunkSize) == all)
        // Pretty-printed input, with whitespace everywhere, too.
        let pretty = JSONEncoder()
        pretty.outputFormatting = .prettyPrinted
        #expect(try ingest(try pretty.encode(all), chunkSize: chunkSize) == all)
    }

    @Test func emptyArray() throws {
        #expect(try ingest(Data(" [ ] ".utf8), chunkSize: 3).isEmpty)
    }

    @Test(arguments: [
        #"{"id": 1}"#,                                          // not an array
        #"[{"id": 1, "text": "a", "tags": []},"#,              // truncated after a comma
        #"[{"id": 1, "text": "a", "tags": []}"#,               // no closing bracket
        #"[{"id": 1, "text": "a", "tags": []},]"#,             // trailing comma
        #"[{"id": 1, "text": "a", "tags": []}] extra"#,        // data after the array
        #"[{"id": "one", "text": "a", "tags": []}]"#,          // wrong type
    ])
    func malformedInputIsADecodingError(text: String) throws {
        let error = #expect(throws: (any Error).self) { try ingest(Data(text.utf8), chunkSize: 1) }
        let depotError = DepotError.wrap(try #require(error), operation: nil, fallback: .processing)
        #expect(depotError.code == .decoding)
    }

    /// A writer failure stops the decoding thread and rolls back.
    @Test func writeFailureStopsEverythingAndRollsBack() throws {
        let queue = try DatabaseQueue()
        try queue.write { db in try db.execute(sql: "CREATE TABLE t (id INTEGER PRIMARY KEY)") }
        let data = try JSONEncoder().encode(things(10_000))
        struct Stop: Error {}
        #expect(throws: Stop.self) {
            try queue.write { db in
                var chunks = 0
                try JSONArrayIngest.decode(Thing.self, from: data, chunkSize: 100, into: db) { db, chunk in
                    for thing in chunk { try db.execute(sql: "INSERT INTO t VALUES (?)", arguments: [thing.id]) }
                    chunks += 1
                    if chunks == 3 { throw Stop() }
                }
            }
        }
        #expect(try queue.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t") } == 0)
    }
}
