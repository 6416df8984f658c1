import Depot
import Foundation

/// What a ``Store`` did about a damaged file: where the damaged file went,
/// what it salvaged, and what was lost.
///
/// A store tells it once, three ways: ``Store/lastRecovery`` (a rebuild at
/// open happens before anyone can listen), ``Store/recoveries()``, and a
/// ``Foundation/Notification/Name/depotStoreRecovered`` notification.
/// Its ``description`` is one sentence for the user; ``error`` keeps the
/// technical cause for logs.
public struct StoreRecovery: Sendable, CustomStringConvertible {
    /// Where the damaged file was kept (its `-wal` beside it, with
    /// `-wal` appended), or `nil` if it could not be kept.
    public var damagedFile: String?
    /// The failure that showed the damage: `.storage`, with SQLite's code and
    /// statement in its underlying error.
    public var error: DepotError
    /// The rows salvaged into the fresh file, by table. The outbox's table is
    /// `depotOutbox`.
    public var kept: [String: Int]
    /// The rows known to be lost, by table: counted in the damaged file, and
    /// not readable or not writable into the fresh one.
    public var lost: [String: Int]
    /// The tables whose precious rows could not all be read, nor counted:
    /// some may be lost, how many is not known.
    public var incomplete: [String]
    /// When the store rebuilt the file (the environment's wall date).
    public var date: Date

    /// Pending writes salvaged from the outbox.
    public var keptPendingWrites: Int { kept[OutboxTable.name] ?? 0 }

    /// Whether nothing precious is known or suspected lost.
    public var isLossless: Bool { lost.values.allSatisfy { $0 == 0 } && incomplete.isEmpty }

    /// One sentence for the user: "The cache file was damaged and has been
    /// rebuilt, keeping 2 pending changes and 5 other saved rows; the damaged
    /// file is at /…/cache.sqlite.damaged-20261128-031500."
    public var description: String {
        let others = kept.filter { $0.key != OutboxTable.name }.values.reduce(0, +)
        var keeping: [String] = []
        if keptPendingWrites > 0 { keeping.append(Self.count(keptPendingWrites, "pending change")) }
        if others > 0 { keeping.append(Self.count(others, keeping.isEmpty ? "saved row" : "other saved row")) }
        var text = "The cache file was damaged and has been rebuilt"
        text += keeping.isEmpty ? "" : ", keeping " + keeping.joined(separator: " and ")
        let lostRows = lost.values.reduce(0, +)
        if lostRows > 0 {
            text += "; \(Self.count(lostRows, "saved row")) could not be recovered"
        } else if !incomplete.isEmpty {
            text += "; some saved rows may not have been recovered"
        }
        if let damagedFile { text += "; the damaged file is at \(damagedFile)" }
        return text + "."
    }

    private static func count(_ n: Int, _ noun: String) -> String {
        "\(n) \(noun)\(n == 1 ? "" : "s")"
    }
}

/// The recoveries of a store from the time of the ``Store/recoveries()`` call.
public typealias StoreRecoveries = DepotStream<StoreRecovery>

extension Notification.Name {
    /// A store rebuilt its damaged file. Posted on the default notification
    /// center with the ``Store`` as its object; the userInfo's
    /// ``StoreRecovery/UserInfoKey/recovery`` is the ``StoreRecovery``.
    public static let depotStoreRecovered = Notification.Name("DepotStoreRecovered")
}

extension StoreRecovery {
    /// Keys of the userInfo of a ``Foundation/Notification/Name/depotStoreRecovered`` notification.
    public enum UserInfoKey {
        /// The ``StoreRecovery``.
        public static let recovery = "recovery"
    }
}
