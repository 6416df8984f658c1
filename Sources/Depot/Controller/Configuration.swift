import CoreMetrics
import Foundation
import Logging
import Tracing

extension NetworkController {
    /// Everything a controller is made from, nested by concern as
    /// async-http-client nests its client's configuration: each setting has
    /// one place.
    ///
    /// ```swift
    /// let controller = NetworkController(configuration: .init(
    ///     baseURL: URL(string: "http://127.0.0.1:8080")!,
    ///     adapters: [DefaultHeaders(["Accept": "application/json"])],
    ///     limits: .init(concurrency: .fixed(2), longestTransfer: .seconds(60)),
    ///     observability: .init(notificationCenter: nil)
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
        /// Values handed to every operation through its ``OperationContext``.
        public var contextValues: OperationContextValues
        /// How much may run and how large and long a transfer may be.
        public var limits: Limits
        /// How the network is measured and what a bad one pauses, drops and paces.
        public var conditions: Conditions
        /// When failed attempts are tried again, and how many retries may be spent.
        public var retries: Retries
        /// Logs, redaction, traces, metrics, spans, notifications and events.
        public var observability: Observability
        /// The clock, the wall date and the random seed. Give the ``Store``
        /// the same one, so that the cache and the network agree on time.
        public var environment: DepotEnvironment

        /// Makes a configuration; every field has a default.
        ///
        /// - Parameters:
        ///   - baseURL: Relative request paths resolve against this (none).
        ///   - transport: What moves the bytes (``URLSessionTransport``).
        ///   - adapters: Run in order on every request (none).
        ///   - authenticator: Bearer tokens with refresh for one origin (none).
        ///   - interceptors: Asked about every attempt, before the retry policy (none).
        ///   - contextValues: Values handed to every operation (none).
        ///   - limits: Concurrency, body size, redirects, transfer time (``Limits/init(concurrency:maximumBodySize:redirects:longestTransfer:)``'s defaults).
        ///   - conditions: Measuring and adapting to the network.
        ///   - retries: Retry policy and budget.
        ///   - observability: Logs, redaction, traces, metrics, notifications, events.
        ///   - environment: Clock, wall date and random seed (``DepotEnvironment/live``).
        public init(
            baseURL: URL? = nil,
            transport: any Transport = URLSessionTransport(),
            adapters: [any RequestAdapter] = [],
            authenticator: TokenAuthenticator? = nil,
            interceptors: [any ResponseInterceptor] = [],
            contextValues: OperationContextValues = OperationContextValues(),
            limits: Limits = Limits(),
            conditions: Conditions = Conditions(),
            retries: Retries = Retries(),
            observability: Observability = Observability(),
            environment: DepotEnvironment = .live
        ) {
            self.baseURL = baseURL
            self.transport = transport
            self.adapters = adapters
            self.authenticator = authenticator
            self.interceptors = interceptors
            self.contextValues = contextValues
            self.limits = limits
            self.conditions = conditions
            self.retries = retries
            self.observability = observability
            self.environment = environment
        }

        /// How much may run at once, and how large and how long one transfer may be.
        public struct Limits: Sendable {
            /// How many transfers may run at once, as the connection quality changes.
            /// Default: ``ConcurrencyPolicy/default`` (offline 0, poor 1, moderate 3,
            /// good 4, excellent 6). A fixed limit is `.fixed(n)`. The limit in
            /// force is ``NetworkController/concurrencyLimit`` (read-only).
            public var concurrency: ConcurrencyPolicy
            /// Bodies larger than this fail with ``DepotError/Code/tooLarge``. Default: 50 MB.
            public var maximumBodySize: Int
            /// How many redirects to follow; 0 returns 3xx responses to the operation. Default: 10.
            public var redirects: Int
            /// No transfer may take longer than this, whatever its operation's
            /// ``Timeout/total`` says: a one-shot tool sets 60 s so that a server
            /// that drips its body cannot hold it. `nil` (the default) leaves each
            /// operation's own limit.
            public var longestTransfer: Duration?

            /// Makes limits; every field has a default.
            public init(
                concurrency: ConcurrencyPolicy = .default,
                maximumBodySize: Int = 50 * 1024 * 1024,
                redirects: Int = 10,
                longestTransfer: Duration? = nil
            ) {
                self.concurrency = concurrency
                self.maximumBodySize = maximumBodySize
                self.redirects = redirects
                self.longestTransfer = longestTransfer
            }
        }

        /// How the network is measured, and what the controller does about a bad one.
        public struct Conditions: Sendable {
            /// How quality is measured: thresholds, smoothing, hysteresis.
            public var monitor: ConnectionMonitor.Configuration
            /// What a bad network pauses and drops. Default: ``QualityRules/default``
            /// (on `.poor`, pause `images` and drop droppable queued work at `.low` and below).
            public var rules: QualityRules
            /// How delayable work (`.low` and below) is paced so that its bytes do
            /// not queue ahead of urgent work at the link's bottleneck. Default:
            /// ``DelayablePacing/default`` (two bandwidth-delay products); `.off`
            /// starts delayable jobs whenever there is room.
            public var delayablePacing: DelayablePacing
            /// While offline, the controller lets one queued operation try after this
            /// delay, doubling up to its upper bound. Default: 1 s to 30 s.
            public var probeBackoff: ClosedRange<Duration>

            /// Makes conditions; every field has a default.
            public init(
                monitor: ConnectionMonitor.Configuration = .default,
                rules: QualityRules = .default,
                delayablePacing: DelayablePacing = .default,
                probeBackoff: ClosedRange<Duration> = .seconds(1) ... .seconds(30)
            ) {
                self.monitor = monitor
                self.rules = rules
                self.delayablePacing = delayablePacing
                self.probeBackoff = probeBackoff
            }
        }

        /// When failed attempts are tried again.
        public struct Retries: Sendable {
            /// When failed attempts are retried. Operations may bring their own.
            /// Default: ``RetryPolicy/default``.
            public var policy: RetryPolicy
            /// How many retries the controller may spend, so a failing server is
            /// not stormed. Default: ``RetryBudget/default``.
            public var budget: RetryBudget

            /// Makes a retry configuration; every field has a default.
            public init(policy: RetryPolicy = .default, budget: RetryBudget = .default) {
                self.policy = policy
                self.budget = budget
            }
        }

        /// Where what happens is told: logs, traces, metrics, spans, notifications, events.
        public struct Observability: Sendable {
            /// Where operations are logged. Secrets in headers are never logged.
            public var logger: Logger
            /// Which headers and query parameters are secrets: their values are
            /// redacted in logs, error details, events and traces, and the headers
            /// are dropped on a redirect to another origin. Default: ``Redaction/default``.
            public var redaction: Redaction
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
            /// Where events are also posted as notifications, with the controller
            /// as their object; `nil` posts none. Default: `.default`.
            public var notificationCenter: NotificationCenter?
            /// How many events each ``NetworkController/events()`` subscriber may
            /// fall behind before the oldest are dropped. Default: 4096.
            public var eventBufferSize: Int

            /// Makes an observability configuration; every field has a default.
            public init(
                logger: Logger = Logger(label: "depot"),
                redaction: Redaction = .default,
                trace: TraceRecorder? = nil,
                metricsFactory: (any MetricsFactory)? = MetricsSystem.factory,
                tracer: (any Tracer)? = InstrumentationSystem.tracer,
                notificationCenter: NotificationCenter? = .default,
                eventBufferSize: Int = 4096
            ) {
                self.logger = logger
                self.redaction = redaction
                self.trace = trace
                self.metricsFactory = metricsFactory
                self.tracer = tracer
                self.notificationCenter = notificationCenter
                self.eventBufferSize = eventBufferSize
            }
        }
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
