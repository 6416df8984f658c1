import Foundation

/// The controller's view of the network as it acts on it: the quality and the
/// policy's limit it last applied, the rules, the categories paused by the app
/// and by the rules, and the probe state while offline.
///
/// A state machine like the ``Scheduler``: the controller tells it what
/// happened (``handle(_:)``, under the controller's lock) and carries out the
/// effects it returns, in order. It knows nothing of tickets' records, tasks or
/// events' delivery, so its tests drive it alone (`ConditionsStateTests`).
struct ConditionsState: Sendable {
    /// What the controller tells the conditions.
    enum Event: Sendable, Hashable {
        /// The monitor changed the quality; `queued` is the work waiting then,
        /// which a rule may pause or drop.
        case qualityChanged(from: ConnectionQuality, to: ConnectionQuality, queued: [QualityRules.Queued<Ticket.ID>])
        /// The concurrency policy's limit is now this.
        case policyLimitChanged(Int)
        /// The app paused or resumed a category.
        case userPaused(OperationCategory)
        case userResumed(OperationCategory)
        /// Offline, the probe loop's backoff ran out: one queued job may try.
        case probeDue
        /// A fail-fast operation found the controller offline with nothing
        /// queued: it is the probe, and runs alone.
        case failFastProbeAdmitted
        /// A job found no network and waits for it, or a fail-fast probe failed offline.
        case probeFoundNoNetwork
        /// A queued ticket that a bad network may drop.
        case droppableQueued(Ticket.ID)
        /// A ticket started or ended: it can no longer be dropped.
        case ticketLeftQueue(Ticket.ID)
    }

    /// What the controller must do, in order.
    enum Effect: Sendable, Hashable {
        /// A controller-wide event.
        case announce(Announcement)
        /// The trace records the quality the controller acts on.
        case traceQuality(ConnectionQuality)
        /// Start the offline probe loop (if none runs and work may still run).
        case startProbing
        /// Stop the probe loop.
        case stopProbing
        /// Pause or resume a category in the scheduler.
        case pause(OperationCategory)
        case resume(OperationCategory)
        /// Cancel a queued droppable ticket.
        case drop(Ticket.ID)
        /// Give the scheduler this limit.
        case setLimit(Int)
    }

    /// The controller-wide events the conditions make.
    enum Announcement: Sendable, Hashable {
        case qualityChanged(from: ConnectionQuality, to: ConnectionQuality)
        case concurrencyChanged(limit: Int)
        case categoryPaused(OperationCategory)
        case categoryResumed(OperationCategory)
        case probing(attempt: Int)

        var detail: NetworkEvent.Detail {
            switch self {
            case .qualityChanged(let old, let new): .qualityChanged(from: old, to: new)
            case .concurrencyChanged(let limit): .concurrencyChanged(limit: limit)
            case .categoryPaused(let category): .categoryPaused(category)
            case .categoryResumed(let category): .categoryResumed(category)
            case .probing(let attempt): .probing(attempt: attempt)
            }
        }
    }

    /// The quality the controller acts on: the monitor's, once applied.
    private(set) var quality: ConnectionQuality
    /// The concurrency policy's limit, once applied.
    private(set) var policyLimit: Int
    /// The limit last given to the scheduler.
    private(set) var appliedLimit: Int
    let rules: QualityRules
    /// Categories paused by the app, and by quality rules: kept apart so that a
    /// recovering network does not resume what the app paused.
    private(set) var userPaused: Set<OperationCategory> = []
    private(set) var rulePaused: Set<OperationCategory> = []
    /// Queued tickets whose operation may be dropped on a bad network.
    private(set) var droppable: Set<Ticket.ID> = []
    /// Offline: one queued job may try the network.
    private(set) var probing = false
    private(set) var probeAttempt = 0

    init(quality: ConnectionQuality, policyLimit: Int, rules: QualityRules) {
        self.quality = quality
        self.policyLimit = policyLimit
        self.rules = rules
        appliedLimit = 0
        appliedLimit = effectiveLimit
    }

    var isOffline: Bool { quality == .offline }

    /// The limit the scheduler should have now.
    var effectiveLimit: Int {
        if isOffline { return probing ? 1 : 0 }
        return policyLimit
    }

    /// Whether a new operation of `priority` is dropped before it is queued.
    func drops(_ priority: Priority) -> Bool {
        rules.drops(priority, at: quality)
    }

    /// The categories that only a rule holds: with nothing running, they let
    /// one job through at a time, so that paused work is not stuck for good.
    var trickling: Set<OperationCategory> {
        rulePaused.subtracting(userPaused)
    }

    mutating func handle(_ event: Event) -> [Effect] {
        switch event {
        case .qualityChanged(let old, let new, let queued):
            return qualityChanged(from: old, to: new, queued: queued)
        case .policyLimitChanged(let limit):
            policyLimit = limit
            return limitEffects()
        case .userPaused(let category):
            userPaused.insert(category)
            return [.pause(category)]
        case .userResumed(let category):
            userPaused.remove(category)
            return rulePaused.contains(category) ? [] : [.resume(category)]
        case .probeDue:
            guard isOffline else { return [] }
            probing = true
            probeAttempt += 1
            return [.announce(.probing(attempt: probeAttempt))] + limitEffects()
        case .failFastProbeAdmitted:
            probing = true
            return limitEffects()
        case .probeFoundNoNetwork:
            guard isOffline, probing else { return limitEffects() }
            probing = false
            return limitEffects()
        case .droppableQueued(let id):
            droppable.insert(id)
            return []
        case .ticketLeftQueue(let id):
            droppable.remove(id)
            return []
        }
    }

    private mutating func qualityChanged(from old: ConnectionQuality, to new: ConnectionQuality, queued: [QualityRules.Queued<Ticket.ID>]) -> [Effect] {
        quality = new
        var effects: [Effect] = [.announce(.qualityChanged(from: old, to: new)), .traceQuality(new)]
        if new == .offline {
            probing = false
            probeAttempt = 0
            effects.append(.startProbing)
        } else if old == .offline {
            probing = false
            probeAttempt = 0
            effects.append(.stopProbing)
        }
        // Rules: pause and drop on a bad network, resume when it recovers.
        let droppable = self.droppable
        let changes = rules.changes(from: old, to: new, queued: queued) { droppable.contains($0) }
        for category in changes.pause.sorted(by: { $0.rawValue < $1.rawValue }) where !rulePaused.contains(category) {
            rulePaused.insert(category)
            effects += [.pause(category), .announce(.categoryPaused(category))]
        }
        for category in changes.resume.sorted(by: { $0.rawValue < $1.rawValue }) where rulePaused.contains(category) {
            rulePaused.remove(category)
            if !userPaused.contains(category) { effects.append(.resume(category)) }
            effects.append(.announce(.categoryResumed(category)))
        }
        for ticket in changes.cancel {
            self.droppable.remove(ticket)
            effects.append(.drop(ticket))
        }
        return effects
    }

    /// A new limit for the scheduler, with its event, when it changed.
    private mutating func limitEffects() -> [Effect] {
        let limit = effectiveLimit
        guard limit != appliedLimit else { return [] }
        appliedLimit = limit
        return [.announce(.concurrencyChanged(limit: limit)), .setLimit(limit)]
    }
}
