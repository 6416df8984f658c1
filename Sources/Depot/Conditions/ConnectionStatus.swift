import Observation

/// The controller's view of the network for SwiftUI: quality, estimates, the
/// concurrency limit and what is paused, kept current on the main actor.
///
/// It is the "why does nothing move?" of a status bar.
///
/// For example:
///
/// ```swift
/// @State var connection = ConnectionStatus(controller: controller)
///
/// if connection.quality == .offline {
///     Label("Offline — showing saved data", systemImage: "wifi.slash")
/// }
/// ```
@MainActor
@Observable
public final class ConnectionStatus {
    /// The connection quality.
    public private(set) var quality: ConnectionQuality
    /// The smoothed bandwidth in bits per second, once measured.
    public private(set) var bandwidth: Double?
    /// The smoothed round-trip time, once measured.
    public private(set) var rtt: Duration?
    /// The concurrency limit in force.
    public private(set) var concurrencyLimit: Int
    /// The categories paused, by the app or by quality rules. A rule's pause
    /// shows at once (it is an event); the app's own `pause(category:)` shows
    /// with the next event (an operation ending, a change of quality or limit),
    /// since the app already knows what it paused.
    public private(set) var pausedCategories: Set<OperationCategory>

    @ObservationIgnored private var task: Task<Void, Never>?

    /// Starts following `controller` until the status is released or the
    /// controller shuts down.
    public init(controller: NetworkController) {
        let estimate = controller.connectionSnapshot
        quality = estimate.quality
        bandwidth = estimate.bandwidth
        rtt = estimate.rtt
        concurrencyLimit = estimate.concurrencyLimit
        pausedCategories = estimate.pausedCategories
        let events = controller.events()
        task = Task { [weak self, weak controller] in
            for await event in events {
                // Every event may come with new estimates; the controller-wide ones always do.
                guard event.isControllerWide || event.kind.isTerminal else { continue }
                guard let self, let controller else { return }
                self.apply(controller.connectionSnapshot)
            }
        }
    }

    isolated deinit {
        task?.cancel()
    }

    private func apply(_ estimate: ConnectionSnapshot) {
        if quality != estimate.quality { quality = estimate.quality }
        if bandwidth != estimate.bandwidth { bandwidth = estimate.bandwidth }
        if rtt != estimate.rtt { rtt = estimate.rtt }
        if concurrencyLimit != estimate.concurrencyLimit { concurrencyLimit = estimate.concurrencyLimit }
        if pausedCategories != estimate.pausedCategories { pausedCategories = estimate.pausedCategories }
    }
}
