import Depot
import DepotTesting
import Foundation

// The examples of doc comments in Sources/Depot/Conditions,
// Sources/Depot/Controller/Configuration.swift and Sources/DepotTesting,
// compiled so that they keep to the public API. (Not checked line by line as
// the articles are.)

enum DocCommentExamples {
    static func showLowBandwidthHint() {}

    static func concurrencyPolicy(api: URL) -> NetworkController {
        let controller = NetworkController(configuration: .init(baseURL: api, limits: .init(concurrency: .adaptive())))
        return controller
    }

    static func mapping() -> ConcurrencyPolicy {
        let policy = ConcurrencyPolicy.mapping([.offline: 0, .poor: 1, .good: 3])   // moderate → 1, excellent → 3
        return policy
    }

    static func connectionMonitor(api: URL) -> NetworkController {
        var configuration = NetworkController.Configuration(baseURL: api)
        configuration.conditions.monitor.samplesToChange = 5
        let controller = NetworkController(configuration: configuration)
        if controller.quality <= .poor { showLowBandwidthHint() }
        return controller
    }

    static func thresholds(api: URL) -> NetworkController.Configuration {
        var configuration = NetworkController.Configuration(baseURL: api)
        configuration.conditions.monitor.thresholds = .init(moderate: 300_000, good: 1_000_000, excellent: 5_000_000)
        return configuration
    }

    static func qualityRules(api: URL) -> NetworkController.Configuration {
        var configuration = NetworkController.Configuration(baseURL: api)
        configuration.conditions.rules = QualityRules(threshold: .moderate, pausedCategories: [.images], dropPriorityAtMost: nil)
        return configuration
    }

    static func retryBudget(api: URL) -> NetworkController.Configuration {
        var configuration = NetworkController.Configuration(baseURL: api)
        configuration.retries.budget = RetryBudget(capacity: 20, depositPerSuccess: 0.2)
        return configuration
    }

    static func retryPolicy(error: DepotError, wallClock: Date, clock: ContinuousClock) async throws {
        var random = SystemRandomNumberGenerator()
        switch RetryPolicy.default.decision(for: error, method: .get, attempt: 1, now: wallClock, using: &random) {
        case .retry(let delay): try await clock.sleep(for: delay)
        case .doNotRetry: throw error   // (the doc comment names the reason)
        }
    }

    static func delayablePacing(base: URL) -> NetworkController.Configuration {
        var configuration = NetworkController.Configuration(baseURL: base)
        configuration.conditions.delayablePacing = .bandwidthDelay(roundTrips: 1)   // tighter than the default
        configuration.conditions.delayablePacing = .bandwidthDelay(roundTrips: 2, rangeBytes: nil)   // whole responses
        configuration.conditions.delayablePacing = .off                             // every delayable transfer starts at once
        return configuration
    }

    static func seededGenerator() {
        var random = SeededGenerator(seed: 42)
        let decision = RetryPolicy.default.decision(forStatus: 503, headers: [:], method: .get, attempt: 2, now: Date(), using: &random)
        print(decision.delay ?? .zero)   // the same every run
    }

    static func configuration() -> NetworkController {
        let controller = NetworkController(configuration: .init(
            baseURL: URL(string: "http://127.0.0.1:8080")!,
            adapters: [DefaultHeaders(["Accept": "application/json"])]
        ))
        return controller
    }
}
