import DemoServer
@testable import Depot
import DepotAsyncHTTPClient
import Foundation
import Logging
import Testing

@Suite(.timeLimit(.minutes(1))) struct RedactionTests {
    // MARK: - The lists

    @Test func defaultHeaderListCoversCredentialsCookiesAndKeyLikeNames() {
        let secret = ["Authorization", "proxy-authorization", "COOKIE", "Set-Cookie", "X-API-Key", "X-Auth-Token", "X-Client-Secret", "Vendor-Api-Key-2"]
        let plain = ["Accept", "Content-Type", "X-Request-ID", "Keyboard", "Location"]
        for name in secret { #expect(Redaction.default.isSecret(headerName: name), "\(name)") }
        for name in plain { #expect(!Redaction.default.isSecret(headerName: name), "\(name)") }
    }

    @Test func listsAreConfigurableAndCaseInsensitive() {
        var redaction = Redaction.default
        redaction.headerNames.insert("X-Tenant-Pass")
        redaction.queryParameters.insert("Sig")
        #expect(redaction.isSecret(headerName: "x-tenant-pass"))
        #expect(redaction.isSecret(queryParameter: "SIG"))
        #expect(redaction.headerNames.contains("x-tenant-pass"))
        #expect(redaction != .default)

        let nothing = Redaction(headerNames: [], headerNameFragments: [], queryParameters: [])
        #expect(!nothing.isSecret(headerName: "Authorization"))
        #expect(nothing.url(URL(string: "https://a.test/?token=t1")!) == "https://a.test/?token=t1")
    }

    @Test func headersKeepNamesAndOrderAndHideSecretValues() {
        let headers: HeaderFields = ["Accept": "text/html", "Cookie": "id=42", "X-Auth-Token": "t1", "Set-Cookie": "a=b", "X-API-Key": "k1"]
        let expected = "Accept: text/html, Cookie: <redacted>, X-Auth-Token: <redacted>, Set-Cookie: <redacted>, X-API-Key: <redacted>"
        #expect(Redaction.default.headers(headers) == expected)
        #expect(headers.description == expected)
        var custom = Redaction.default
        custom.headerNames.insert("Accept")
        #expect(custom.headers(["Accept": "text/html"]) == "Accept: <redacted>")
    }

    // MARK: - URLs and text

    @Test(arguments: [
        ("https://api.test/feed?token=t1&page=2&Access_Token=t2#top", "https://api.test/feed?token=<redacted>&page=2&Access_Token=<redacted>#top"),
        ("https://api.test/cb#access_token=t3&state=s", "https://api.test/cb#access_token=<redacted>&state=s"),
        ("https://api.test/x?api%5Fkey=t4", "https://api.test/x?api%5Fkey=<redacted>"),
        ("https://ann:pw1@api.test/x?page=1", "https://ann:<redacted>@api.test/x?page=1"),
        ("https://api.test/x?monkey=1&key=t5&signature=", "https://api.test/x?monkey=1&key=<redacted>&signature=<redacted>"),
        ("https://api.test/token=path/x?page=1", "https://api.test/token=path/x?page=1"),
        ("https://api.test/plain", "https://api.test/plain"),
    ])
    func urlsLoseSecretValuesAndKeepEverythingElse(url: String, expected: String) {
        #expect(Redaction.default.url(URL(string: url)!) == expected)
    }

    @Test(arguments: [
        ("more than 10, last to http://h.test/a?signature=s1", "more than 10, last to http://h.test/a?signature=<redacted>"),
        ("bad redirect Location \"/x?password=p1\"", "bad redirect Location \"/x?password=<redacted>\""),
        ("(http://h.test/?key=k1 → https://u:p2@h.test/?b=1)", "(http://h.test/?key=<redacted> → https://u:<redacted>@h.test/?b=1)"),
        ("grant_type=password&password=hunter2", "grant_type=password&password=<redacted>"),
        ("token=t6 expired", "token=<redacted> expired"),
        ("a = b, keys: none", "a = b, keys: none"),
    ])
    func textLosesTheSecretsOfEveryURLInIt(text: String, expected: String) {
        #expect(Redaction.default.text(text) == expected)
    }

    @Test func errorsLoseSecretsAndKeepTheirCause() {
        struct Cause: Error, CustomStringConvertible {
            var description: String { "could not reach http://h.test/?api_key=k9" }
        }
        let error = DepotError(.transport, operation: "Fetch", bodyExcerpt: "see /x?token=t7", detail: "GET http://h.test/?token=t8", underlying: Cause())
        let redacted = Redaction.default.error(error)
        #expect(redacted.detail == "GET http://h.test/?token=<redacted>")
        #expect(redacted.bodyExcerpt == "see /x?token=<redacted>")
        #expect(redacted.underlying is Cause)
        #expect(redacted.description.contains("api_key=<redacted>"))
        for secret in ["k9", "t7", "t8"] { #expect(!redacted.description.contains(secret)) }

        let dependent = Redaction.default.error(DepotError(.dependencyFailed, operation: "Later", underlying: error))
        #expect(!dependent.description.contains("t8") && !dependent.description.contains("k9"))
        #expect((dependent.underlying as? DepotError)?.code == .transport)
    }

    // MARK: - A whole run

    /// One value per kind of secret, found nowhere else.
    enum Secret {
        static let bearer = "bearer-S3CRET-6f1c"
        static let cookie = "cookie-S3CRET-2b7e"
        static let apiKey = "apikey-S3CRET-9d40"
        static let custom = "custom-S3CRET-51aa"
        static let query = "query-S3CRET-c3d8"
        static let location = "location-S3CRET-7e02"
        static let loop = "loop-S3CRET-a9f3"
        static let all = [bearer, cookie, apiKey, custom, query, location, loop]
    }

    /// The test's own secret header, beside the default list.
    static let customHeader = "X-Tenant-Pass"

    /// What a run wrote out: log lines, events, notifications and the trace exports.
    struct Output {
        var logs: [String] = []
        var events: [String] = []
        var notifications: [String] = []
        var traceJSON = ""
        var traceSVG = ""

        var everything: [(place: String, text: String)] {
            logs.map { ("log", $0) } + events.map { ("event", $0) } + notifications.map { ("notification", $0) }
                + [("trace JSON", traceJSON), ("trace SVG", traceSVG)]
        }

        func places(of secret: String) -> [String] {
            everything.filter { $0.text.contains(secret) }.map(\.place)
        }
    }

    /// Runs an operation with each kind of secret against depot-server, on
    /// AsyncHTTPClient, and returns everything Depot wrote out.
    func runWithEverySecret(_ redaction: Redaction) async throws -> Output {
        let sink = LogSink()
        var logger = Logger(label: "depot.redaction") { _ in sink }
        logger.logLevel = .trace
        let center = NotificationCenter()
        let notes = Locked<[String]>([])
        let names: [Notification.Name] = [
            .depotOperationEnqueued, .depotOperationStarted, .depotOperationRetried, .depotOperationFinished,
            .depotOperationFailed, .depotOperationCancelled, .depotOperationWaitingForNetwork,
        ]
        let observers = names.map { name in
            center.addObserver(forName: name, object: nil, queue: nil) { note in
                var dumped = ""
                dump(note.userInfo ?? [:], to: &dumped)
                let text = "\(note.name.rawValue) \(String(describing: note.userInfo ?? [:])) \(dumped)"
                notes.withLock { $0.append(text) }
            }
        }
        defer { for observer in observers { center.removeObserver(observer) } }
        let recorder = TraceRecorder()
        let operations = 4
        var output = Output()

        try await withServer { server in
            func url(_ fault: DemoServer.Fault, query: String) -> URL {
                URL(string: server.url(for: fault).absoluteString + "?" + query)!
            }
            try await withController(AsyncHTTPClientTransport(), baseURL: server.baseURL, configure: {
                $0.observability.logger = logger
                $0.observability.redaction = redaction
                $0.observability.notificationCenter = center
                $0.observability.trace = recorder
                $0.adapters = [
                    Credentials.bearer(Secret.bearer, for: server.baseURL),
                    DefaultHeaders(["Cookie": "session=\(Secret.cookie)", "X-API-Key": Secret.apiKey, Self.customHeader: Secret.custom]),
                ]
            }) { controller in
                let events = controller.events()
                let collector = Task {
                    var seen: [String] = []
                    var ended = 0
                    for await event in events {
                        var dumped = ""
                        dump(event, to: &dumped)
                        var text = "\(event) \(String(reflecting: event)) \(dumped)"
                        if let error = event.error {
                            text += " \(error) \(error.localizedDescription) \(error.detail ?? "") \(error.bodyExcerpt ?? "")"
                        }
                        seen.append(text)
                        if event.kind.isTerminal { ended += 1 }
                        if ended == operations { break }
                    }
                    return seen
                }

                // Given headers with every kind of secret, which the server receives,
                let echoed = try await controller.perform(FetchRaw(url: server.url(for: .echoHeaders))).text
                for secret in [Secret.bearer, Secret.cookie, Secret.apiKey, Secret.custom] {
                    #expect(echoed.contains(secret), "the server did not get \(secret)")
                }
                // a token in a query,
                _ = try await controller.perform(FetchRaw(url: url(.hello, query: "access_token=\(Secret.query)&page=2")))
                // a redirect whose Location carries a secret query,
                let redirected = try await controller.perform(FetchRaw(url: url(.redirects(2), query: "token=\(Secret.location)")))
                #expect(redirected.url.query?.contains(Secret.location) == true)
                // and a redirect error whose message carries the URL:
                let loop = await DepotError.from { _ = try await controller.perform(FetchRaw(url: url(.redirectLoop, query: "signature=\(Secret.loop)"))) }
                #expect(loop?.code == .tooManyRedirects)

                output.events = await collector.value
                output.logs = sink.lines
            }
        }
        output.notifications = notes.value
        output.traceJSON = String(decoding: try recorder.jsonData(), as: UTF8.self)
        output.traceSVG = recorder.svg()
        return output
    }

    @Test func aRunWithEveryKindOfSecretWritesNoneOfThem() async throws {
        var redaction = Redaction.default
        redaction.headerNames.insert(Self.customHeader)
        let output = try await runWithEverySecret(redaction)

        // Then no log line, event, notification or trace export holds a secret,
        for secret in Secret.all {
            #expect(output.places(of: secret).isEmpty, "\(secret) in \(output.places(of: secret))")
        }
        // though they were there to be written, redacted.
        #expect(output.logs.contains { $0.contains("request headers") && $0.contains("\(Self.customHeader): <redacted>") && $0.contains("Authorization: <redacted>") })
        #expect(output.logs.contains { $0.contains("access_token=<redacted>&page=2") })
        #expect(output.events.contains { $0.contains("signature=<redacted>") })
        #expect(output.notifications.contains { $0.contains("signature=<redacted>") })
        #expect(output.traceJSON.contains("FetchRaw") && output.traceSVG.contains("FetchRaw"))
    }

    @Test func theSameRunWithoutRedactionWritesEveryKindOfSecret() async throws {
        // The control: the run above would catch a leak of each kind.
        let output = try await runWithEverySecret(Redaction(headerNames: [], headerNameFragments: [], queryParameters: []))
        for secret in Secret.all {
            #expect(!output.places(of: secret).isEmpty, "\(secret) was never written")
        }
        #expect(output.events.contains { $0.contains(Secret.loop) })
        #expect(output.notifications.contains { $0.contains(Secret.loop) })
    }
}
