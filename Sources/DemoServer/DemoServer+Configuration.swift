import Foundation

extension DemoServer {
    /// How a server is set up.
    public struct Configuration: Sendable {
        /// The address to bind. Only loopback addresses are expected.
        public var host: String
        /// The port; 0 picks a free one.
        public var port: Int
        /// The seed all generated data comes from.
        public var seed: UInt64
        /// How many forum posts exist at start.
        public var initialPosts: Int
        /// A new forum post appears every this much server time.
        public var postInterval: Duration
        /// The wall-clock date the server's time starts at (publication dates are relative to it).
        public var epoch: Date
        /// The server's clock. Inject a manual clock in tests to make posts appear on demand.
        public var clock: any Clock<Duration>
        /// The link's behaviour for every route; `POST /_control` changes it at runtime.
        public var conditions: NetworkConditions
        /// The approximate size of each `/avatars/N.png`.
        public var avatarBytes: Int
        /// How long an access token from `POST /oauth/token` lasts, in server time.
        public var tokenLifetime: Duration
        /// How many Timeline posts exist at start (ids 1...N, at change number 0).
        public var timelinePosts: Int
        /// How many of the latest changes each change feed (Timeline's, the
        /// CRM's) keeps for `Last-Event-ID` and `/changes?since=`; `POST
        /// /_control {"changeHistory": N}` changes it at runtime.
        public var changeHistory: Int
        /// How often an open event stream gets a `: keep-alive` comment, in server time.
        public var heartbeatInterval: Duration

        /// Makes a configuration.
        public init(
            host: String = "127.0.0.1",
            port: Int = 0,
            seed: UInt64 = 1,
            initialPosts: Int = 20,
            postInterval: Duration = .seconds(60),
            epoch: Date = Date(timeIntervalSince1970: 1_767_225_600),
            clock: any Clock<Duration> = ContinuousClock(),
            conditions: NetworkConditions = .none,
            avatarBytes: Int = 20_000,
            tokenLifetime: Duration = .seconds(3600),
            timelinePosts: Int = 30,
            changeHistory: Int = 1_000,
            heartbeatInterval: Duration = .seconds(15)
        ) {
            self.host = host
            self.port = port
            self.seed = seed
            self.initialPosts = initialPosts
            self.postInterval = postInterval
            self.epoch = epoch
            self.clock = clock
            self.conditions = conditions
            self.avatarBytes = avatarBytes
            self.tokenLifetime = tokenLifetime
            self.timelinePosts = timelinePosts
            self.changeHistory = changeHistory
            self.heartbeatInterval = heartbeatInterval
        }
    }
}
