@testable import Depot
import DepotTesting
import Foundation
import Synchronization
import Testing

/// The transfer rules every transport shares, driven by a scripted transport
/// and a test clock: no network, no waiting.
@Suite(.timeLimit(.minutes(1))) struct TransferPipelineTests {
    func pipeline(_ transport: any Transport, clock: some Clock<Duration> = ContinuousClock(), limit: Int = 1 << 20, redirects: Int = 10) -> TransferPipeline {
        TransferPipeline(transport: transport, timebase: Timebase(clock), maximumBodySize: limit, redirectLimit: redirects)
    }

    func redirect(_ status: Int = 302, to location: String) -> TransportResponse {
        TransportResponse(status: status, headers: ["Location": location], body: .empty)
    }

    func ok(_ text: String = "ok") -> TransportResponse {
        TransportResponse(status: 200, headers: ["Content-Length": "\(text.utf8.count)"], body: TransportBody(data: Data(text.utf8)))
    }

    @Test func refusesHTTPSToHTTPRedirect() async throws {
        let transport = ScriptedTransport { request in
            request.url.scheme == "https" ? redirect(to: "http://example.test/plain") : ok()
        }
        let request = TransportRequest(url: URL(string: "https://example.test/secure")!)
        let error = await DepotError.from { _ = try await pipeline(transport).run(request, timeout: .default) { _ in } }
        #expect(error?.code == .insecureRedirect)
        #expect(error?.description.contains("https://example.test/secure") == true)
    }

    @Test func allowsHTTPToHTTPSRedirect() async throws {
        let transport = ScriptedTransport { request in
            request.url.scheme == "http" ? redirect(301, to: "https://example.test/") : ok("secure")
        }
        let result = try await pipeline(transport).run(TransportRequest(url: URL(string: "http://example.test/")!), timeout: .default) { _ in }
        #expect(result.response.text == "secure")
        #expect(result.response.url.absoluteString == "https://example.test/")
    }

    @Test func dropsCredentialsWhenTheOriginChangesAndKeepsThemOtherwise() async throws {
        let transport = ScriptedTransport { request in
            switch request.url.path {
            case "/start": return redirect(to: "/same")
            case "/same": return redirect(307, to: "http://other.test:81/elsewhere")
            default: return ok()
            }
        }
        var request = TransportRequest(url: URL(string: "http://api.test/start")!)
        request.headers = ["Authorization": "Bearer s3cret", "Cookie": "session=1", "Accept": "application/json"]
        _ = try await pipeline(transport).run(request, timeout: .default) { _ in }
        let seen = Dictionary(transport.requests.map { ($0.url.absoluteString, $0.headers) }, uniquingKeysWith: { $1 })
        let same = seen["http://api.test/same"]
        #expect(same?["Authorization"] == "Bearer s3cret")
        #expect(same?["Cookie"] == "session=1")
        let other = seen["http://other.test:81/elsewhere"]
        #expect(other?["Authorization"] == nil)
        #expect(other?["Cookie"] == nil)
        #expect(other?["Accept"] == "application/json")
    }

    @Test func redirectErrorsShowNoSecretOfTheirURLs() async throws {
        let transport = ScriptedTransport { request in
            switch request.url.path {
            case "/secure": return redirect(to: "http://example.test/plain?token=location-secret")
            case "/bad": return redirect(to: "http://[bad?password=bad-secret")
            default: return redirect(to: "/again?signature=loop-secret")
            }
        }
        let insecure = await DepotError.from {
            _ = try await pipeline(transport).run(TransportRequest(url: URL(string: "https://example.test/secure?key=own-secret")!), timeout: .default) { _ in }
        }
        #expect(insecure?.code == .insecureRedirect)
        #expect(insecure?.detail == "https://example.test/secure?key=<redacted> → http://example.test/plain?token=<redacted>")
        let bad = await DepotError.from { _ = try await pipeline(transport).run(TransportRequest(url: URL(string: "http://example.test/bad")!), timeout: .default) { _ in } }
        #expect(bad?.code == .invalidRequest)
        #expect(bad?.detail?.contains("password=<redacted>") == true)
        var redaction = Redaction.default
        redaction.queryParameters = ["page"]
        let loop = TransferPipeline(transport: transport, timebase: Timebase(ContinuousClock()), maximumBodySize: 1 << 20, redirectLimit: 2, redaction: redaction)
        let tooMany = await DepotError.from { _ = try await loop.run(TransportRequest(url: URL(string: "http://example.test/start?page=1")!), timeout: .default) { _ in } }
        #expect(tooMany?.code == .tooManyRedirects)
        #expect(tooMany?.detail == "more than 2, last to http://example.test/again?signature=loop-secret")
        for error in [insecure, bad] {
            #expect(error.map { !$0.description.contains("secret") } == true, "\(String(describing: error))")
        }
    }

    @Test func dropsTheConfiguredSecretHeadersWhenTheOriginChanges() async throws {
        let transport = ScriptedTransport { request in
            request.url.host == "other.test" ? ok() : redirect(to: "http://other.test/")
        }
        var redaction = Redaction.default
        redaction.headerNames.insert("X-Tenant-Pass")
        let pipeline = TransferPipeline(transport: transport, timebase: Timebase(ContinuousClock()), maximumBodySize: 1 << 20, redirectLimit: 10, redaction: redaction)
        var request = TransportRequest(url: URL(string: "http://api.test/")!)
        request.headers = ["X-Tenant-Pass": "p", "X-API-Key": "k", "X-Auth-Token": "t", "Proxy-Authorization": "Basic x", "Accept": "text/plain"]
        _ = try await pipeline.run(request, timeout: .default) { _ in }
        #expect(transport.requests.last { $0.url.host == "other.test" }?.headers == ["Accept": "text/plain"])
    }

    @Test func aPortChangeIsAnOriginChange() {
        #expect(Origin(URL(string: "http://a.test/")!) == Origin(URL(string: "http://A.test:80/x")!))
        #expect(Origin(URL(string: "http://a.test:8080/")!) != Origin(URL(string: "http://a.test:8081/")!))
        #expect(Origin(URL(string: "https://a.test/")!) != Origin(URL(string: "http://a.test/")!))
    }

    @Test func capsRedirectsAtTheLimit() async throws {
        let transport = ScriptedTransport { _ in redirect(to: "/again") }
        let error = await DepotError.from { _ = try await pipeline(transport).run(TransportRequest(url: URL(string: "http://a.test/")!), timeout: .default) { _ in } }
        #expect(error?.code == .tooManyRedirects)
        #expect(transport.requests.count == 11)  // the original request and 10 redirects
    }

    @Test func followsExactlyTenRedirects() async throws {
        let transport = ScriptedTransport { request in
            let n = Int(request.url.lastPathComponent) ?? 0
            return n < 10 ? redirect(to: "/\(n + 1)") : ok("arrived")
        }
        let result = try await pipeline(transport).run(TransportRequest(url: URL(string: "http://a.test/0")!), timeout: .default) { _ in }
        #expect(result.response.text == "arrived")
    }

    @Test func seeOtherTurnsPostIntoGetWithoutBody() async throws {
        let transport = ScriptedTransport { request in
            request.url.path == "/posts" ? redirect(303, to: "/posts/1") : ok()
        }
        var request = TransportRequest(url: URL(string: "http://a.test/posts")!, method: .post, body: Data("{}".utf8))
        request.headers["Content-Type"] = "application/json"
        _ = try await pipeline(transport).run(request, timeout: .default) { _ in }
        let second = try #require(transport.requests.last)
        #expect(second.method == .get)
        #expect(second.body == nil)
        #expect(second.headers["Content-Type"] == nil)
    }

    @Test func temporaryRedirectKeepsMethodAndBody() async throws {
        let transport = ScriptedTransport { request in
            request.url.path == "/a" ? redirect(307, to: "/b") : ok()
        }
        _ = try await pipeline(transport).run(TransportRequest(url: URL(string: "http://a.test/a")!, method: .put, body: Data("x".utf8)), timeout: .default) { _ in }
        #expect(transport.requests.last?.method == .put)
        #expect(transport.requests.last?.body == Data("x".utf8))
    }

    @Test func redirectLimitZeroHandsBackTheRedirect() async throws {
        let transport = ScriptedTransport { _ in redirect(to: "/elsewhere") }
        let result = try await pipeline(transport, redirects: 0).run(TransportRequest(url: URL(string: "http://a.test/")!), timeout: .default) { _ in }
        #expect(result.response.status == 302)
    }

    @Test func rejectsADeclaredLengthOverTheLimitBeforeReading() async throws {
        let transport = ScriptedTransport { _ in
            TransportResponse(status: 200, headers: ["Content-Length": "2000"], body: TransportBody(unfolding: {
                Issue.record("the body must not be read")
                return nil
            }))
        }
        let error = await DepotError.from { _ = try await pipeline(transport, limit: 1000).run(TransportRequest(url: URL(string: "http://a.test/")!), timeout: .default) { _ in } }
        #expect(error?.code == .tooLarge)
    }

    @Test func aResponseWithoutABodyIsNotSizedByItsContentLength() async throws {
        // HEAD and 304 give the resource's length; no body follows, so neither the
        // size limit nor a truncation check applies.
        let transport = ScriptedTransport { request in
            TransportResponse(status: request.method == .head ? 200 : 304, headers: ["Content-Length": "60000000"], body: .empty)
        }
        let head = try await pipeline(transport, limit: 1000).run(TransportRequest(url: URL(string: "http://a.test/")!, method: .head), timeout: .default) { _ in }
        #expect(head.response.status == 200 && head.response.body.isEmpty)
        let notModified = try await pipeline(transport, limit: 1000).run(TransportRequest(url: URL(string: "http://a.test/")!), timeout: .default) { _ in }
        #expect(notModified.response.status == 304)
    }

    @Test func stopsReadingAnEndlessBodyAtTheLimit() async throws {
        let pulled = Locked(0)
        let transport = ScriptedTransport { _ in
            TransportResponse(status: 200, body: TransportBody(unfolding: {
                pulled.withLock { $0 += 1 }
                return Data(count: 1024)
            }))
        }
        let error = await DepotError.from { _ = try await pipeline(transport, limit: 10 * 1024).run(TransportRequest(url: URL(string: "http://a.test/")!), timeout: .default) { _ in } }
        #expect(error?.code == .tooLarge)
        #expect(pulled.value == 11)  // one chunk past the limit, then it stops
    }

    @Test func aCancelledPulledBodyPullsNoFurtherChunk() async throws {
        let pulled = Locked(0)
        let body = TransportBody(unfolding: {
            pulled.withLock { $0 += 1 }
            return Data([1])
        })
        var iterator = body.makeAsyncIterator()
        #expect(try await iterator.next() == Data([1]))
        body.cancel()
        #expect(try await iterator.next() == nil)
        #expect(try await iterator.next() == nil)
        #expect(pulled.value == 1)
    }

    @Test func aPulledBodyThatFailedEnds() async throws {
        let pulled = Locked(0)
        let body = TransportBody(unfolding: {
            let count = pulled.withLock { $0 += 1; return $0 }
            if count == 1 { throw DepotError(.connectionLost) }
            return Data([1])
        })
        var iterator = body.makeAsyncIterator()
        await #expect(throws: DepotError.self) { _ = try await iterator.next() }
        #expect(try await iterator.next() == nil)
        #expect(pulled.value == 1)
    }

    @Test func detectsATruncatedBody() async throws {
        let transport = ScriptedTransport { _ in
            TransportResponse(status: 200, headers: ["Content-Length": "100"], body: TransportBody(data: Data(count: 10)))
        }
        let error = await DepotError.from { _ = try await pipeline(transport).run(TransportRequest(url: URL(string: "http://a.test/")!), timeout: .default) { _ in } }
        #expect(error?.code == .connectionLost)
        #expect(error?.detail?.contains("10 of 100") == true)
    }

    @Test func reportsProgressAndASample() async throws {
        let clock = ManualClock()
        let chunks = Locked(0)
        let transport = ScriptedTransport { _ in
            clock.advance(by: .milliseconds(100))  // time to first byte
            return TransportResponse(status: 200, headers: ["Content-Length": "3072"], body: TransportBody(unfolding: {
                let n = chunks.withLock { $0 += 1; return $0 }
                guard n <= 3 else { return nil }
                clock.advance(by: .milliseconds(50))
                return Data(count: 1024)
            }))
        }
        let progress = Locked<[TransferProgress]>([])
        let result = try await pipeline(transport, clock: clock).run(TransportRequest(url: URL(string: "http://a.test/")!), timeout: .default) { p in
            progress.withLock { $0.append(p) }
        }
        #expect(progress.value.map(\.received) == [1024, 2048, 3072])
        #expect(progress.value.last?.expected == 3072)
        #expect(result.sample.bytes == 3072)
        #expect(result.sample.timeToFirstByte == .milliseconds(100))
        #expect(result.sample.transferDuration == .milliseconds(150))
    }

    @Test func idleTimeoutFiresOnTheInjectedClock() async throws {
        let clock = ManualClock()
        let (sent, signal) = AsyncStream<Void>.makeStream()
        let transport = ScriptedTransport { _ in
            signal.yield()
            // A server that never answers: wait until cancelled.
            try await clock.sleep(for: .seconds(3600))
            return ok()
        }
        let task = Task {
            await DepotError.from { _ = try await pipeline(transport, clock: clock).run(TransportRequest(url: URL(string: "http://a.test/")!), timeout: .idle(.seconds(10))) { _ in } }
        }
        var iterator = sent.makeAsyncIterator()
        _ = await iterator.next()
        await clock.sleepers(atLeast: 2)  // the silent server and the watchdog
        clock.advance(by: .seconds(9))
        #expect(clock.sleeperCount == 2)  // 9 s of silence is not yet a timeout
        clock.advance(by: .seconds(1))
        let error = await task.value
        #expect(error?.code == .timedOut)
        #expect(error?.detail?.contains("without a byte") == true)
    }

    @Test func idleTimeoutResetsWithEveryChunk() async throws {
        let clock = ManualClock()
        let origin = clock.now
        let sent = Locked(0)
        let transport = ScriptedTransport { _ in
            TransportResponse(status: 200, body: TransportBody(unfolding: {
                let n = sent.withLock { $0 += 1; return $0 }
                guard n <= 5 else { return nil }
                // Chunk n arrives at t = 8n s: each gap is under the 10 s idle limit, the total is not.
                try await clock.sleep(until: origin.advanced(by: .seconds(8 * n)))
                return Data(count: 10)
            }))
        }
        let (progress, signal) = AsyncStream<Int64>.makeStream()
        let task = Task {
            try await pipeline(transport, clock: clock).run(TransportRequest(url: URL(string: "http://a.test/")!), timeout: .idle(.seconds(10))) { p in
                signal.yield(p.received)
            }
        }
        var received = progress.makeAsyncIterator()
        for n in 1...5 {
            await clock.sleepers(atLeast: 2)  // the next chunk and the watchdog
            clock.advance(by: .seconds(8))
            #expect(await received.next() == Int64(10 * n))
        }
        let result = try await task.value
        #expect(result.response.body.count == 50)
    }

    @Test func totalTimeoutCapsASlowDrip() async throws {
        let clock = ManualClock()
        let origin = clock.now
        let sent = Locked(0)
        let transport = ScriptedTransport { _ in
            TransportResponse(status: 200, body: TransportBody(unfolding: {
                let n = sent.withLock { $0 += 1; return $0 }
                try await clock.sleep(until: origin.advanced(by: .seconds(n)))  // one byte a second, forever
                return Data(count: 1)
            }))
        }
        let (progress, signal) = AsyncStream<Int64>.makeStream()
        let task = Task {
            await DepotError.from {
                _ = try await pipeline(transport, clock: clock).run(TransportRequest(url: URL(string: "http://a.test/")!), timeout: Timeout(idle: .seconds(5), total: .seconds(30))) { p in
                    signal.yield(p.received)
                }
            }
        }
        var received = progress.makeAsyncIterator()
        for n in 1...29 {
            await clock.sleepers(atLeast: 2)  // the next byte and the watchdog
            clock.advance(by: .seconds(1))
            #expect(await received.next() == Int64(n))
        }
        await clock.sleepers(atLeast: 2)
        clock.advance(by: .seconds(1))
        let error = await task.value
        #expect(error?.code == .timedOut)
        #expect(error?.detail?.contains("in total") == true)
    }

    /// A body that arrives in one chunk is kept as that chunk, except when the
    /// chunk is a slice: a response body's indices start at 0.
    @Test func aSlicedSingleChunkStillGivesABodyIndexedFromZero() async throws {
        let whole = Data("--sliced".utf8)
        let transport = ScriptedTransport { _ in
            TransportResponse(status: 200, headers: ["Content-Length": "6"], body: TransportBody(data: whole[2...]))
        }
        let result = try await pipeline(transport).run(TransportRequest(url: URL(string: "http://example.test/")!), timeout: .default) { _ in }
        #expect(result.response.body.startIndex == 0)
        #expect(result.response.body.first == UInt8(ascii: "s"))
        #expect(result.response.text == "sliced")
    }

    /// The default clock is read directly, but only when it IS the continuous
    /// clock: another clock that shares its instant type keeps its own time.
    @Test func aClockSharingTheContinuousInstantKeepsItsOwnTime() {
        struct FrozenClock: Clock {
            let frozen = ContinuousClock.now
            var now: ContinuousClock.Instant { frozen }
            var minimumResolution: Duration { .zero }
            func sleep(until deadline: ContinuousClock.Instant, tolerance: Duration?) async throws {}
        }
        let timebase = Timebase(FrozenClock())
        // Read through the continuous clock, this would have moved on.
        #expect(timebase.now() == .zero)
        #expect(timebase.now() == .zero)
    }

    /// The idle timeout fires at the very instant the body ends, again and
    /// again. Whatever the caller is told matches what `process` did: a
    /// success that was processed, or a timeout that processed nothing; never
    /// a cancellation after `process` wrote (it was, before the fix: the watch
    /// could fire after the transfer had completed and cancel the job while it
    /// processed).
    @Test func aTimeoutAtTheInstantTheBodyEndsIsNeverReportedAsCancelled() async throws {
        final class Flag: Sendable {
            private let state = Mutex(false)
            func set() { state.withLock { $0 = true } }
            var isSet: Bool { state.withLock { $0 } }
        }
        /// Writes (sets the flag), then awaits as a store write does after
        /// its commit, until the deadline watch that the body's end woke has
        /// run: a cancellation it sent would surface here.
        struct Recorded: NetworkOperation {
            typealias Output = String
            let processed: Flag
            let clock: ManualClock
            var request: NetworkRequest { .get(URL(string: "http://h.test/x")!) }
            var timeout: Timeout { .idle(.seconds(5)) }
            func process(_ response: NetworkResponse, context: OperationContext) async throws -> String {
                processed.set()
                await clock.advanceAndSettle(by: .zero)
                try Task.checkCancellation()
                return response.text
            }
        }
        var outcomes: [String: Int] = [:]
        for _ in 0..<200 {
            let clock = ManualClock()
            let transport = ScriptedTransport { _ in
                let calls = Mutex(0)
                return TransportResponse(status: 200, body: TransportBody(unfolding: {
                    let call = calls.withLock { count in
                        count += 1
                        return count
                    }
                    if call == 1 { return Data("hi".utf8) }
                    // The last read: the idle deadline is reached as the body ends.
                    clock.advance(by: .seconds(5))
                    return nil
                }))
            }
            let processed = Flag()
            try await withController(transport, configure: { $0.environment.clock = clock }) { controller in
                do {
                    _ = try await controller.perform(Recorded(processed: processed, clock: clock))
                    #expect(processed.isSet)
                    outcomes["succeeded", default: 0] += 1
                } catch {
                    let code = (error as? DepotError)?.code
                    #expect(code == .timedOut, "\(error)")
                    #expect(!processed.isSet, "told \(error) after process ran")
                    outcomes["\(code.map { "\($0)" } ?? "?")", default: 0] += 1
                }
            }
        }
        #expect(outcomes["cancelled"] == nil, "\(outcomes)")
    }
}
