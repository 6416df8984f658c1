/// What a ``LiveFeed`` is doing, as its ``SyncStatus/live`` says.
public enum LiveState: Sendable, Hashable, CustomStringConvertible {
    /// Opening the stream (or waiting to reopen it after a drop).
    case connecting
    /// The stream is open: changes arrive as they happen.
    case live
    /// Bringing what changed meanwhile through the change feed (or a full
    /// sync); `changes` applied so far.
    case catchingUp(changes: Int)
    /// Caught up, with no stream open: the feed has none, nobody watches
    /// it, or the server asked not to reconnect.
    case upToDate
    /// Waiting for the network; the feed resumes from its cursor when it is back.
    case offline

    public var description: String {
        switch self {
        case .connecting: "connecting"
        case .live: "live"
        case .catchingUp(let changes): changes == 0 ? "catching up" : "catching up (\(changes) changes)"
        case .upToDate: "up to date"
        case .offline: "offline"
        }
    }
}
