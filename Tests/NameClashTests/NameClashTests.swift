import AsyncHTTPClient
import Depot
import DepotAsyncHTTPClient
import DepotStore
import DepotTesting
import Foundation
import GRDB
import HTTPTypes
import Hummingbird
import NIOCore
import NIOHTTP1
import Testing

/// Depot's public types live beside the packages a Depot user imports with
/// it: this file imports them all and names every public type of Depot's
/// modules unqualified. It compiles only if no name is ambiguous, and the
/// test checks that each name is Depot's own type.
@Suite struct NameClashTests {
    struct Row: FetchableRecord, PersistableRecord, Identifiable, Equatable, Sendable {
        var id: Int
        init(row: GRDB.Row) throws { id = row["id"] }
        init(id: Int) { self.id = id }
        func encode(to container: inout PersistenceContainer) { container["id"] = id }
    }

    /// Every public top-level type of Depot, DepotStore, DepotAsyncHTTPClient
    /// and DepotTesting, named unqualified.
    /// A change feed, to name the feed types by.
    struct Feed: ChangeFeed {
        var syncKey: String { "feed" }
        var snapshotRequest: NetworkRequest { .get("all") }
        func changesRequest(after cursor: String) -> NetworkRequest { .get("changes") }
        func decodeChanges(_ response: NetworkResponse) throws -> ChangePage<Int> { ChangePage([], cursor: "0") }
        func decodeSnapshot(_ response: NetworkResponse) throws -> ChangePage<Int> { ChangePage([], cursor: "0") }
        func apply(_ change: Int, to db: Database) throws {}
        func removeAll(from db: Database) throws {}
    }

    static let types: [String: Any.Type] = [
        "AsyncHTTPClientTransport": AsyncHTTPClientTransport.self,
        "CachedValueOperation": (any CachedValueOperation).Type.self,
        "CatchUpReport": CatchUpReport.self,
        "ChangeFeed": (any ChangeFeed).Type.self,
        "ChangePage": ChangePage<Int>.self,
        "CorruptionPolicy": CorruptionPolicy.self,
        "LiveFeed": LiveFeed<Feed>.self,
        "LiveFeedEvent": LiveFeedEvent<Int>.self,
        "LiveMessage": LiveMessage<Int>.self,
        "LiveState": LiveState.self,
        "BulkEncodableRecord": (any BulkEncodableRecord).Type.self,
        "BulkUpsert": BulkUpsert<Row>.self,
        "CacheInvalidation": CacheInvalidation.self,
        "CachePolicy": CachePolicy.self,
        "CacheUpdate": CacheUpdate<Int>.self,
        "CacheWriteSink": CacheWriteSink<Int>.self,
        "CachingOperation": (any CachingOperation).Type.self,
        "Coalescing": Coalescing.self,
        "ConcurrencyPolicy": ConcurrencyPolicy.self,
        "ConnectionSnapshot": ConnectionSnapshot.self,
        "ConnectionMonitor": ConnectionMonitor.self,
        "ConnectionQuality": ConnectionQuality.self,
        "ConnectionStatus": ConnectionStatus.self,
        "Credentials": Credentials.self,
        "CredentialStorage": (any CredentialStorage).Type.self,
        "DelayablePacing": DelayablePacing.self,
        "InMemoryCredentialStorage": InMemoryCredentialStorage.self,
        "InterceptedAttempt": InterceptedAttempt.self,
        "InterceptorContext": InterceptorContext.self,
        "InterceptorDecision": InterceptorDecision.self,
        "OAuth2PasswordGrant": OAuth2PasswordGrant.self,
        "OAuth2TokenEndpoint": OAuth2TokenEndpoint.self,
        "LiveValue": LiveValue<Int>.self,
        "LiveValueUpdates": LiveValueUpdates<Int>.self,
        "PreciousRows": PreciousRows.self,
        "ResponseInterceptor": (any ResponseInterceptor).Type.self,
        "StoreRecoveries": StoreRecoveries.self,
        "StoreRecovery": StoreRecovery.self,
        "TokenAuthenticator": TokenAuthenticator.self,
        "TokenCredential": TokenCredential.self,
        "TokenRefreshContext": TokenRefreshContext.self,
        "TokenRefresher": TokenRefresher.self,
        "DefaultHeaders": DefaultHeaders.self,
        "DepotEnvironment": DepotEnvironment.self,
        "DepotError": DepotError.self,
        "DepotStream": DepotStream<Int>.self,
        "EvictionReport": EvictionReport.self,
        "ExitPolicy": ExitPolicy.self,
        "FileTransport": FileTransport.self,
        "FixtureTransport": FixtureTransport.self,
        "HeaderFields": HeaderFields.self,
        "ItemPath": ItemPath.self,
        "JSONArrayIngest": JSONArrayIngest.self,
        "ManualClock": ManualClock.self,
        "ManualDate": ManualDate.self,
        "Mutation": (any Mutation).Type.self,
        "NetworkController": NetworkController.self,
        "NetworkEvent": NetworkEvent.self,
        "NetworkEvents": NetworkEvents.self,
        "NetworkOperation": (any NetworkOperation).Type.self,
        "NetworkRequest": NetworkRequest.self,
        "NetworkResponse": NetworkResponse.self,
        "NetworkSimulator": NetworkSimulator.self,
        "OfflineBehavior": OfflineBehavior.self,
        "OperationCategory": OperationCategory.self,
        "OperationContext": OperationContext.self,
        "OperationContextKey": (any OperationContextKey).Type.self,
        "OperationContextValues": OperationContextValues.self,
        "Outbox": Outbox.self,
        "OutboxChange": OutboxChange.self,
        "OutboxConflict": OutboxConflict.self,
        "ConflictResolution": ConflictResolution<Int>.self,
        "ConflictSide": ConflictSide.self,
        "EditConflict": EditConflict<Int>.self,
        "EditConflictKind": EditConflictKind.self,
        "FieldConflict": FieldConflict.self,
        "FieldMerge": FieldMerge.self,
        "RecordKey": RecordKey.self,
        "RecordState": RecordState.self,
        "RecordVersion": RecordVersion.self,
        "RecordVersions": RecordVersions.self,
        "ServerRecord": ServerRecord<Int>.self,
        "VersionedEdit": (any VersionedEdit).Type.self,
        "OutboxChanges": OutboxChanges.self,
        "OutboxEntry": OutboxEntry.self,
        "OutboxFailure": OutboxFailure.self,
        "OutboxSnapshot": OutboxSnapshot.self,
        "OutboxStatus": OutboxStatus.self,
        "OutboxTicket": OutboxTicket.self,
        "OutboxUpdates": OutboxUpdates.self,
        "PageableEndpoint": (any PageableEndpoint).Type.self,
        "PageContents": PageContents<Int>.self,
        "PagedResults": PagedResults<Row>.self,
        "PagePosition": PagePosition.self,
        "Origin": Origin.self,
        "Priority": Priority.self,
        "QualityRules": QualityRules.self,
        "Redaction": Redaction.self,
        "Recorder": Recorder<Int>.self,
        "RequestAdapter": (any RequestAdapter).Type.self,
        "ResponseBodySink": (any ResponseBodySink).Type.self,
        "ResultsChangeSet": ResultsChangeSet.self,
        "ResultsController": ResultsController<Row>.self,
        "ResultsObservation": ResultsObservation.self,
        "ResultsSection": ResultsSection<Row>.self,
        "ResultsSnapshot": ResultsSnapshot<Row>.self,
        "ResultsUpdate": ResultsUpdate<Row>.self,
        "ResultsUpdates": ResultsUpdates<Row>.self,
        "RetainedRow": RetainedRow.self,
        "Retention": Retention.self,
        "RetentionPolicy": RetentionPolicy.self,
        "RetentionReference": RetentionReference.self,
        "RetentionRule": RetentionRule.self,
        "RetryBudget": RetryBudget.self,
        "RetryDecision": RetryDecision.self,
        "RetryPolicy": RetryPolicy.self,
        "ScriptedTransport": ScriptedTransport.self,
        "SeededGenerator": SeededGenerator.self,
        "ServerSentEvent": ServerSentEvent.self,
        "ServerSentEventParser": ServerSentEventParser.self,
        "ShutdownReport": ShutdownReport.self,
        "Store": Store.self,
        "StreamedBody": StreamedBody.self,
        "StreamingCachingOperation": (any StreamingCachingOperation).Type.self,
        "StreamingNetworkOperation": (any StreamingNetworkOperation).Type.self,
        "StoreFixtures": StoreFixtures.self,
        "SuspensionExecutor": SuspensionExecutor.self,
        "SyncError": SyncError.self,
        "SyncLedger": SyncLedger.self,
        "SyncStatus": SyncStatus.self,
        "SyncStatusUpdates": SyncStatusUpdates.self,
        "Ticket": Ticket.self,
        "Timeout": Timeout.self,
        "Trace": Trace.self,
        "TraceRecorder": TraceRecorder.self,
        "TransferProgress": TransferProgress.self,
        "TransferSample": TransferSample.self,
        "Transport": (any Transport).Type.self,
        "TransportBody": TransportBody.self,
        "TransportRequest": TransportRequest.self,
        "TransportResponse": TransportResponse.self,
        "URLSessionTransport": URLSessionTransport.self,
    ]

    static let depotModules = ["Depot", "DepotStore", "DepotAsyncHTTPClient", "DepotTesting"]

    @Test func everyUnqualifiedNameIsDepotsOwnType() {
        for (name, type) in Self.types {
            let module = String(reflecting: type)
                .replacingOccurrences(of: "any ", with: "")
                .split(separator: ".").first.map(String.init) ?? ""
            #expect(Self.depotModules.contains(module), "\(name) is \(String(reflecting: type))")
        }
    }

    /// The list above is every public top-level type in the sources: a new one
    /// must be added here, and so is checked against the other packages.
    @Test func theListNamesEveryPublicType() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let declaration = try Regex(#"^public (?:final )?(?:struct|enum|class|actor|protocol|typealias) ([A-Za-z0-9_]+)"#).anchorsMatchLineEndings()
        var found: Set<String> = []
        for module in Self.depotModules {
            let folder = root.appending(path: "Sources/\(module)")
            let files = try #require(FileManager.default.enumerator(atPath: folder.path)).compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }
            for file in files {
                let text = try String(contentsOf: folder.appending(path: file), encoding: .utf8)
                for match in text.matches(of: declaration) {
                    if let name = match.output[1].substring { found.insert(String(name)) }
                }
            }
        }
        #expect(found.count > 50)
        let listed = Set(Self.types.keys)
        #expect(found.subtracting(listed).isEmpty, "public types missing from the list: \(found.subtracting(listed).sorted())")
        #expect(listed.subtracting(found).isEmpty, "listed types that are gone: \(listed.subtracting(found).sorted())")
    }

    /// The types users meet most, used the way they are used, unqualified.
    @Test func theCommonTypesWorkUnqualified() throws {
        var headers: HeaderFields = ["Accept": "application/json"]
        headers["X-Trace"] = "1"
        let request = NetworkRequest.get("contacts", headers: headers)
        #expect(request.method == .get)
        let response = NetworkResponse(status: 200, headers: headers, body: Data("{}".utf8), url: URL(string: "http://h.test/contacts")!)
        #expect(response.status == 200)
        let method: NetworkRequest.Method = .post
        #expect(method.rawValue == "POST")
        // And the other packages' types of the same role, beside them.
        let hbResponse = Hummingbird.Response(status: .ok)
        let nioHeaders = NIOHTTP1.HTTPHeaders([("Accept", "text/plain")])
        let fields: HTTPFields = [.accept: "text/plain"]
        #expect(hbResponse.status == .ok && nioHeaders.count == 1 && fields.count == 1)
    }
}
