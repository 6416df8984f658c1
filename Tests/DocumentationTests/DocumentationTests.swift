import Depot
import DepotStore
import DepotTesting
import Foundation
import Testing

/// Every code example in README.md and the DocC catalog is compiled: its text
/// is in one of the files under `Examples/`, which this target compiles. These
/// tests check that the docs' text and the compiled text are the same, and run
/// the examples that need no network.
@Suite(.timeLimit(.minutes(1))) struct DocumentationTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Each document, and the example file that holds its code.
    static let documents: [(document: String, examples: String)] = [
        ("README.md", "Tests/DocumentationTests/Examples/README.swift"),
        ("Sources/Depot/Depot.docc/GettingStarted.md", "Tests/DocumentationTests/Examples/GettingStarted.swift"),
        ("Sources/Depot/Depot.docc/OfflineBehavior.md", "Tests/DocumentationTests/Examples/GettingStarted.swift Tests/DocumentationTests/Examples/OfflineBehavior.swift"),
        ("Sources/Depot/Depot.docc/TestingYourOperations.md", "Tests/DocumentationTests/Examples/TestingYourOperations.swift"),
        ("Sources/Depot/Depot.docc/OfflineWrites.md", "Tests/DocumentationTests/Examples/OfflineWrites.swift"),
        ("Sources/Depot/Depot.docc/Authentication.md", "Tests/DocumentationTests/Examples/Authentication.swift"),
        ("Sources/Depot/Depot.docc/Observability.md", "Tests/DocumentationTests/Examples/Observability.swift"),
        ("Sources/Depot/Depot.docc/KeepingTheCacheInShape.md", "Tests/DocumentationTests/Examples/Retention.swift Tests/DocumentationTests/Examples/KeepingTheCacheInShape.swift"),
    ]

    /// The ```swift blocks of a Markdown text.
    static func swiftBlocks(in markdown: String) -> [String] {
        var blocks: [String] = []
        var current: [String]?
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if current == nil, trimmed == "```swift" {
                current = []
            } else if current != nil, trimmed == "```" {
                blocks.append(current!.joined(separator: "\n"))
                current = nil
            } else if current != nil {
                current!.append(String(line))
            }
        }
        return blocks
    }

    /// Code as lines without indentation, blank lines dropped: a block in a
    /// doc is indented differently from the same code inside a function.
    static func lines(_ code: String) -> [String] {
        code.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// Whether every line of `block` is in `compiled`, in the same order. The
    /// compiled file may add lines between them (a function around top-level
    /// code, a type's other members), but none of the doc's may be missing,
    /// changed or moved.
    static func contains(_ compiled: [String], inOrder block: [String]) -> Bool {
        var next = compiled.startIndex
        for line in block {
            guard let found = compiled[next...].firstIndex(of: line) else { return false }
            next = compiled.index(after: found)
        }
        return true
    }

    @Test(arguments: documents.map(\.document))
    func everySwiftBlockIsCompiled(document: String) throws {
        let entry = try #require(Self.documents.first { $0.document == document })
        let markdown = try String(contentsOf: Self.root.appending(path: document), encoding: .utf8)
        let compiled = try entry.examples.split(separator: " ").flatMap {
            Self.lines(try String(contentsOf: Self.root.appending(path: String($0)), encoding: .utf8))
        }
        let blocks = Self.swiftBlocks(in: markdown)
        #expect(!blocks.isEmpty, "\(document) has no swift blocks")
        for block in blocks {
            #expect(Self.contains(compiled, inOrder: Self.lines(block)), "not in \(entry.examples):\n\(block)")
        }
    }

    /// Every DocC article with Swift code is checked above.
    @Test func everyArticleIsListed() throws {
        let catalog = Self.root.appending(path: "Sources/Depot/Depot.docc")
        let articles = try FileManager.default.contentsOfDirectory(atPath: catalog.path).filter { $0.hasSuffix(".md") }
        for article in articles {
            let text = try String(contentsOf: catalog.appending(path: article), encoding: .utf8)
            guard !Self.swiftBlocks(in: text).isEmpty else { continue }
            #expect(Self.documents.contains { $0.document == "Sources/Depot/Depot.docc/\(article)" }, "\(article)")
        }
    }

    @Test func aBlockMatchesOnlyWithEveryLineInOrder() {
        let compiled = ["func f() {", "let a = 1", "let b = 2", "}"]
        #expect(Self.contains(compiled, inOrder: ["let a = 1", "let b = 2"]))
        #expect(!Self.contains(compiled, inOrder: ["let b = 2", "let a = 1"]))
        #expect(!Self.contains(compiled, inOrder: ["let a = 1", "let c = 3"]))
    }

    @Test func theBlockFinderFindsBlocksAndOnlySwiftOnes() {
        let markdown = "text\n```swift\nlet a = 1\n```\n```sh\nls\n```\n  ```swift\n  b()\n  ```\n"
        #expect(Self.swiftBlocks(in: markdown) == ["let a = 1", "  b()"])
    }

    // MARK: The examples that run without a network

    static let contactsJSON = Data(#"{"items": [{"id": 1, "name": "Ann"}, {"id": 2, "name": "Bob"}]}"#.utf8)

    @Test func processIsAPlainFunction() async throws {
        let contacts = try await TestingYourOperationsExamples.callProcess(fixture: Self.contactsJSON)
        #expect(contacts.map(\.name) == ["Ann", "Bob"])
    }

    @Test func aFileFixtureGoesThroughTheController() async throws {
        let folder = FileManager.default.temporaryDirectory.appending(path: "depot-docs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appending(path: "contacts.json")
        try Self.contactsJSON.write(to: file)
        #expect(try await TestingYourOperationsExamples.pointItAtAFile(fixtureURL: file).count == 2)

        let rows = folder.appending(path: "rows.json")
        try Data(#"[{"id": 1, "name": "Ann"}]"#.utf8).write(to: rows)
        try await TestingYourOperationsExamples.storeFixtures(fixtureURL: rows)
    }

    @Test func theObservabilityTestExampleCountsAndTraces() async throws {
        let file = FileManager.default.temporaryDirectory.appending(path: "depot-docs-\(UUID().uuidString).json")
        try Self.contactsJSON.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        try await ObservabilityExamples.inTests(fixtureURL: file)
    }

    @Test func aCachingOperationsProcessWritesToTheStoreInItsContext() async throws {
        try await StoreFixtures.withStore(migrator: migrator) { store in
            let response = NetworkResponse(status: 200, body: Data(#"[{"id": 7, "name": "Cy"}]"#.utf8), url: URL(string: "http://test/contacts")!)
            let update = try await TestingYourOperationsExamples.callProcessWithAStore(response, store: store)
            #expect(update.written == 1)
            #expect(try await store.read { db in try CachedContact.fetchCount(db) } == 1)
        }
    }

    /// A transport that never answers, until it is cancelled.
    struct NeverAnswers: Transport {
        func send(_ request: TransportRequest) async throws -> TransportResponse {
            let (never, continuation) = AsyncStream<Int>.makeStream()
            for await _ in never {}
            continuation.finish()
            throw CancellationError()
        }
    }

    @Test func theManualClockExampleEndsTheGrace() async {
        await TestingYourOperationsExamples.manualClock(api: URL(string: "http://api.test")!, transport: NeverAnswers())
    }
}
