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

    /// Each document, and the example files that hold its code.
    static let documents: [(document: String, examples: String)] = [
        ("README.md", "Tests/DocumentationTests/Examples/README.swift"),
        ("Sources/Depot/Depot.docc/GettingStarted.md", "Tests/DocumentationTests/Examples/GettingStarted.swift"),
        ("Sources/Depot/Depot.docc/OfflineAndBadNetworks.md", "Tests/DocumentationTests/Examples/GettingStarted.swift Tests/DocumentationTests/Examples/OfflineBehavior.swift"),
        ("Sources/Depot/Depot.docc/Authentication.md", "Tests/DocumentationTests/Examples/Authentication.swift"),
        ("Sources/Depot/Depot.docc/Observability.md", "Tests/DocumentationTests/Examples/Observability.swift"),
        ("Sources/DepotStore/DepotStore.docc/YourFirstCachedList.md", "Tests/DocumentationTests/Examples/YourFirstCachedList.swift"),
        ("Sources/DepotStore/DepotStore.docc/OfflineWrites.md", "Tests/DocumentationTests/Examples/OfflineWrites.swift"),
        ("Sources/DepotStore/DepotStore.docc/LiveData.md", "Tests/DocumentationTests/Examples/LiveData.swift"),
        ("Sources/DepotStore/DepotStore.docc/KeepingTheCacheInShape.md", "Tests/DocumentationTests/Examples/Retention.swift Tests/DocumentationTests/Examples/KeepingTheCacheInShape.swift"),
        ("Sources/DepotTesting/DepotTesting.docc/TestingYourOperations.md", "Tests/DocumentationTests/Examples/TestingYourOperations.swift"),
        ("Sources/DepotAsyncHTTPClient/DepotAsyncHTTPClient.docc/DepotAsyncHTTPClient.md", "Tests/DocumentationTests/Examples/DepotAsyncHTTPClient.swift"),
    ]

    /// The DocC catalog of every library product.
    static let catalogs = [
        "Sources/Depot/Depot.docc",
        "Sources/DepotStore/DepotStore.docc",
        "Sources/DepotTesting/DepotTesting.docc",
        "Sources/DepotAsyncHTTPClient/DepotAsyncHTTPClient.docc",
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

    /// Every DocC article with Swift code, in every catalog, is checked above.
    @Test(arguments: catalogs)
    func everyArticleIsListed(catalog: String) throws {
        let folder = Self.root.appending(path: catalog)
        let articles = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".md") }
        #expect(!articles.isEmpty, "\(catalog) has no landing page")
        for article in articles {
            let text = try String(contentsOf: folder.appending(path: article), encoding: .utf8)
            guard !Self.swiftBlocks(in: text).isEmpty else { continue }
            #expect(Self.documents.contains { $0.document == "\(catalog)/\(article)" }, "\(article)")
        }
    }

    /// The README's installation section says what the manifest says: the
    /// tools version, the platforms, and the GRDB an app declares beside Depot.
    @Test func theInstallationSectionMatchesTheManifest() throws {
        let readme = try String(contentsOf: Self.root.appending(path: "README.md"), encoding: .utf8)
        let manifest = try String(contentsOf: Self.root.appending(path: "Package.swift"), encoding: .utf8)
        let manifestLines = manifest.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        let toolsVersion = try #require(manifestLines.first)
        #expect(readme.contains(toolsVersion))
        let platforms = try #require(manifestLines.first { $0.hasPrefix("platforms:") })
        #expect(readme.contains(platforms), "the README's platforms are not \(platforms)")
        let grdb = try #require(manifestLines.first { $0.hasPrefix(".package(url: \"https://github.com/groue/GRDB.swift\"") })
        #expect(readme.contains(grdb.trimmingCharacters(in: CharacterSet(charactersIn: ","))), "the README does not declare \(grdb)")
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
    // (The suites beside the examples, ContactsTests and TestingYourOperationsTests, run too.)

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

        let one = folder.appending(path: "one.json")
        try Data(#"{"items": [{"id": 1, "name": "Ann"}]}"#.utf8).write(to: one)
        try await TestingYourOperationsExamples.storeFixtures(fixtureURL: one)
    }

    @Test func theObservabilityTestExampleCountsAndTraces() async throws {
        let file = FileManager.default.temporaryDirectory.appending(path: "depot-docs-\(UUID().uuidString).json")
        try Self.contactsJSON.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        try await ObservabilityExamples.inTests(fixtureURL: file)
    }

    @Test func aCachingOperationsProcessWritesToTheStoreInItsContext() async throws {
        try await StoreFixtures.withStore(migrator: .contacts) { store in
            let response = NetworkResponse(status: 200, body: Data(#"{"items": [{"id": 7, "name": "Cy"}]}"#.utf8), url: URL(string: "http://test/contacts")!)
            let update = try await TestingYourOperationsExamples.callProcessWithAStore(response, store: store)
            #expect(update.written == 1)
            #expect(try await store.read { db in try CachedContact.fetchCount(db) } == 1)
        }
    }

    /// The article's status line, for each state a screen meets.
    @MainActor @Test func theContactsStatusLineSaysWhatTheStatusKnows() {
        let date = Date(timeIntervalSince1970: 1_767_225_600)
        let time = date.formatted(date: .omitted, time: .shortened)
        let offline = SyncError(code: .offline, message: "offline", date: date)
        #expect(ContactsScreen.line(for: .init(isSyncing: true, lastSynced: nil, lastError: nil)) == "syncing…")
        #expect(ContactsScreen.line(for: .init(isSyncing: false, lastSynced: nil, lastError: nil)) == "not synced yet")
        #expect(ContactsScreen.line(for: .init(isSyncing: false, lastSynced: date, lastError: nil)) == "last synced \(time)")
        #expect(ContactsScreen.line(for: .init(isSyncing: true, lastSynced: date, lastError: offline)) == "offline · showing contacts from \(time)")
        #expect(ContactsScreen.line(for: .init(isSyncing: false, lastSynced: nil, lastError: offline)) == "offline · nothing cached yet")
    }
}
