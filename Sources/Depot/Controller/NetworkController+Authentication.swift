import Foundation

/// What the controller does when its ``TokenAuthenticator`` signs in or out.
extension NetworkController {
    /// Emits ``NetworkEvent/Kind/signedIn`` or ``NetworkEvent/Kind/signedOut``;
    /// a sign-in lets the jobs held for credentials go.
    func credentialsChanged(signedIn: Bool, reason: String? = nil) {
        let now = timebase.now()
        let effects = state.withLock { state -> [Effect] in
            var effects: [Effect] = [.emit(controllerEvent(signedIn ? .signedIn : .signedOut(reason: reason ?? "signed out"), at: now), nil)]
            if signedIn {
                apply(state.scheduler.releaseHeld(), in: &state, at: now, into: &effects)
            }
            return effects
        }
        perform(effects)
    }

    /// How many operations wait for a sign-in.
    public var heldForCredentials: Int {
        state.withLock { $0.scheduler.heldJobCount }
    }
}
