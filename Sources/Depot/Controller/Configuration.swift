import CoreMetrics
import Foundation
import Logging
import Tracing

extension NetworkController {
    /// Everything a controller is made from.
    ///
    /// ```swift
    /// let controller = NetworkController(configuration: .init(
    ///     baseURL: URL(string: "http://127.0.0.1:8080")!,
    ///     adapters: [DefaultHeaders(["Accept": "application/json"])]
    /// ))
    /// ```
    public struct Configuration: Sendable {
        /// Relative request paths resolve against this.
        public var baseURL: URL?
        /// What moves the bytes. Default: ``URLSessionTransport``.
        public var transport: any Transport
        /// Run in order on every request: default headers, credentials, ...
        public var adapters: [any RequestAdapter]
        /// Bearer tokens for one origin, refreshed once for everyone when they
        /// expire or are refused. It adapts requests after ``adapters`` and is
        /// the first interceptor. Default: none.
        public var authenticator: TokenAuthenticator?
        /// Asked in order about every attempt, after the authenticator and
        /// before the retry policy (see ``ResponseInterceptor``). Default: none.
        public var interceptors: [any ResponseInterceptor]
        /// The source of time for timeouts, grace periods and event timestamps.
        public var clock: any Clock<Duration>
        /// Where operations are logged. Secrets in headers are never logged.
        public var logger: Logger
        /// Which headers and query parameters are secrets: their values are
        /// redacted in logs, error details, events and traces, and the headers
        /// are dropped on a redirect to another origin. Default: ``Redaction/default``.
        public var redaction: Redaction
        /// How many transfers may run at once, as the connection quality changes.
        /// Default: ``ConcurrencyPolicy/default`` (offline 0, poor 1, moderate 2,
        /// good 4, excellent 6). A fixed limit is `.fixed(n)`: the one place
        /// the limit is configured.
        public var concurrencyPolicy: ConcurrencyPolicy
        /// How quality is measured: thresholds, smoothing, hysteresis.
        public var monitor: ConnectionMonitor.Configuration
        /// What a bad network pauses and drops. Default: ``QualityRules/default``
        /// (on `.poor`, pause `images` and drop droppable queued work at `.low` and below).
        public var qualityRules: QualityRules
        /// How delayable work (`.low` and below) is paced so that its bytes do
        /// not queue ahead of urgent work at the link's bottleneck. Default:
        /// ``DelayablePacing/default`` (two bandwidth-delay products); `.off`
        /// starts delayable jobs whenever there is room.
        public var delayablePacing: DelayablePacing
        /// When failed attempts are retried. Operations may bring their own.
        public var retryPolicy: RetryPolicy
        /// How many retries the controller may spend, so a failing server is not stormed.
        public var retryBudget: RetryBudget
        /// While offline, the controller lets one queued operation try after this
        /// delay, doubling up to `probeBackoff.upperBound`.
        public var probeBackoff: ClosedRange<Duration>
        /// The wall clock, for `Retry-After` dates.
        public var currentDate: @Sendable () -> Date
        /// A fixed number from which retry jitter is drawn, so that backoff
        /// delays repeat from run to run (in tests); `nil` draws from the system.
        public var jitterSeed: UInt64?
        /// Records a waterfall trace of every operation when set.
        public var trace: TraceRecorder?
        /// Where operation counts, durations, bytes, retries and the controller's
        /// gauges go (see <doc:Observability>); `nil` records none. Default: the
        /// factory `MetricsSystem.bootstrap` installed when the configuration
        /// was made, which records nothing if none was.
        public var metricsFactory: (any MetricsFactory)?
        /// What makes each transfer's client span and injects its context
        /// (`traceparent`) into the request; `nil` makes none. Default: the
        /// tracer `InstrumentationSystem.bootstrap` installed when the
        /// configuration was made, which traces nothing if none was.
        public var tracer: (any Tracer)?

        /// Bodies larger than this fail with ``DepotError/Code/tooLarge``.
        public var maximumBodySize: Int
        /// How many redirects to follow; 0 returns 3xx responses to the operation.
        public var redirectLimit: Int
        /// No transfer may take longer than this, whatever its operation's
        /// ``Timeout/total`` says: a one-shot tool sets 60 s so that a server
        /// that drips its body cannot hold it. `nil` (the default) leaves each
        /// operation's own limit.
        public var longestTransfer: Duration?
        /// Where events are also posted as notifications; `nil` posts none.
        public var notificationCenter: NotificationCenter?
        /// Values handed to every operation through its ``OperationContext``.
        public var contextValues: OperationContextValues
        /// How many events each `events` subscriber may fall behind before the oldest are dropped.
        public var eventBufferSize: Int

        /// Makes a configuration; every field can be set here, and every one has
        /// a default.
        ///
        /// - Parameters:
        ///   - baseURL: Relative request paths resolve against this (none).
        ///   - transport: What moves the bytes (``URLSessionTransport``).
        ///   - adapters: Run in order on every request (none).
        ///   - authenticator: Bearer tokens with refresh for one origin (none).
        ///   - interceptors: Asked about every attempt, before the retry policy (none).
        ///   - clock: The source of time (`ContinuousClock`).
        ///   - logger: Where operations are logged (label `depot`).
        ///   - redaction: Which header and query values are secrets (``Redaction/default``).
        ///   - concurrencyPolicy: How many transfers may run at once
        ///     (``ConcurrencyPolicy/default``; `.fixed(n)` for a fixed limit).
        ///   - monitor: How quality is measured (``ConnectionMonitor/Configuration/default``).
        ///   - qualityRules: What a bad network pauses and drops (``QualityRules/default``).
        ///   - delayablePacing: How delayable work is paced (``DelayablePacing/default``).
        ///   - retryPolicy: When failed attempts are retried (``RetryPolicy/default``).
        ///   - retryBudget: How many retries the controller may spend (``RetryBudget/default``).
        ///   - probeBackoff: Offline probe delays (1 s, doubling up to 30 s).
        ///   - currentDate: The wall clock, for `Retry-After` dates (`Date()`).
        ///   - jitterSeed: A fixed number from which retry jitter is drawn, so backoff repeats in tests; `nil` draws from the system.
        ///   - trace: Records a waterfall of every operation when set (none).
        ///   - metricsFactory: Where metrics go (`MetricsSystem.factory`); `nil` records none.
        ///   - tracer: What makes each transfer's span (`InstrumentationSystem.tracer`); `nil` makes none.
        ///   - maximumBodySize: Larger bodies fail with `.tooLarge` (50 MB).
        ///   - redirectLimit: Redirects to follow (10).
        ///   - longestTransfer: A cap on every transfer's total time (none).
        ///   - notificationCenter: Where events are posted (`.default`); `nil` posts none.
        ///   - contextValues: Values handed to every operation (none).
        ///   - eventBufferSize: How far an `events` subscriber may fall behind (4096).
        public init(
            baseURL: URL? = nil,
            transport: any Transport = URLSessionTransport(),
            adapters: [any RequestAdapter] = [],
            authenticator: TokenAuthenticator? = nil,
            interceptors: [any ResponseInterceptor] = [],
            clock: any Clock<Duration> = ContinuousClock(),
            logger: Logger = Logger(label: "depot"),
            redaction: Redaction = .default,
            concurrencyPolicy: ConcurrencyPolicy = .default,
            monitor: ConnectionMonitor.Configuration = .default,
            qualityRules: QualityRules = .default,
            delayablePacing: DelayablePacing = .default,
            retryPolicy: RetryPolicy = .default,
            retryBudget: RetryBudget = .default,
            probeBackoff: ClosedRange<Duration> = .seconds(1) ... .seconds(30),
            currentDate: @escaping @Sendable () -> Date = { Date() },
            jitterSeed: UInt64? = nil,
            trace: TraceRecorder? = nil,
            metricsFactory: (any MetricsFactory)? = MetricsSystem.factory,
            tracer: (any Tracer)? = InstrumentationSystem.tracer,
            maximumBodySize: Int = Configuration.defaultMaximumBodySize,
            redirectLimit: Int = Configuration.defaultRedirectLimit,
            longestTransfer: Duration? = nil,
            notificationCenter: NotificationCenter? = .default,
            contextValues: OperationContextValues = OperationContextValues(),
            eventBufferSize: Int = 4096
        ) {
            self.baseURL = baseURL
            self.transport = transport
            self.adapters = adapters
            self.authenticator = authenticator
            self.interceptors = interceptors
            self.clock = clock
            self.logger = logger
            self.redaction = redaction
            self.concurrencyPolicy = concurrencyPolicy
            self.monitor = monitor
            self.qualityRules = qualityRules
            self.delayablePacing = delayablePacing
            self.retryPolicy = retryPolicy
            self.retryBudget = retryBudget
            self.probeBackoff = probeBackoff
            self.currentDate = currentDate
            self.jitterSeed = jitterSeed
            self.trace = trace
            self.metricsFactory = metricsFactory
            self.tracer = tracer
            self.maximumBodySize = maximumBodySize
            self.redirectLimit = redirectLimit
            self.longestTransfer = longestTransfer
            self.notificationCenter = notificationCenter
            self.contextValues = contextValues
            self.eventBufferSize = eventBufferSize
        }

        /// 50 MB.
        public static let defaultMaximumBodySize = 50 * 1024 * 1024
        /// 10 redirects.
        public static let defaultRedirectLimit = 10
    }
}

/// What ``NetworkController/shutdown(grace:)`` did.
public struct ShutdownReport: Sendable, Hashable, CustomStringConvertible {
    /// Operations that completed successfully after shutdown began.
    public var finished: Int = 0
    /// Operations that failed after shutdown began.
    public var failed: Int = 0
    /// Operations cancelled: at once (exit policy `.cancel`) or when the grace period ran out.
    public var cancelled: Int = 0
    /// Whether the grace period ran out before the `.finish` operations were done.
    public var graceExpired: Bool = false

    public var description: String {
        "shutdown: \(finished) finished, \(failed) failed, \(cancelled) cancelled" + (graceExpired ? " (grace period ran out)" : "")
    }
}
