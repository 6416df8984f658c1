import Foundation

/// What the controller does when its ``TokenAuthenticator`` signs in or out.
extension NetworkController {
    /// Emits ``NetworkEvent/Kind/signedIn`` or ``NetworkEvent/Kind/signedOut``;
    /// a sign-in lets the jobs held for credentials go.
    func credentialsChanged(signedIn: Bool, reason: String? = nil) {
        let now = timebase.now()
        let (effects, listeners) = state.withLock { state -> ([Effect], [@Sendable () -> Void]) in
            var effects: [Effect] = [.emit(controllerEvent(signedIn ? .signedIn : .signedOut(reason: reason ?? "signed out"), at: now), nil)]
            if signedIn {
                apply(state.scheduler.releaseHeld(), in: &state, at: now, into: &effects)
            }
            return (effects, signedIn ? state.credentialsListeners : [])
        }
        perform(effects)
        for listener in listeners { listener() }
    }

    /// A refresh gave a new token: what waited for credentials may go again.
    func credentialsRenewed() {
        let listeners = state.withLock { $0.credentialsListeners }
        for listener in listeners { listener() }
    }

    /// Calls `listener` whenever credentials come back: a sign-in through
    /// the ``TokenAuthenticator``, or a refresh that gave a new token. An
    /// outbox resumes the lanes a 401 held this way. The listener runs
    /// outside every lock and must not block.
    package func addCredentialsListener(_ listener: @escaping @Sendable () -> Void) {
        state.withLock { $0.credentialsListeners.append(listener) }
    }

    /// How many operations wait for a sign-in.
    public var heldForCredentials: Int {
        state.withLock { $0.scheduler.heldJobCount }
    }
}
