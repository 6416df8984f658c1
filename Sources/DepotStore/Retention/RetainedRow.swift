import Depot
import Foundation
import GRDB

/// A row that eviction must leave alone: a table and the row's primary key.
///
/// A ``Mutation`` names the rows its pending write needs in
/// ``Mutation/retainedRows``, so that a ``RetentionPolicy`` never evicts the
/// row a commit or rollback will update.
///
/// For example:
///
/// ```swift
/// var retainedRows: [RetainedRow] { [RetainedRow(table: "post", key: payload.localID)] }
/// ```
public struct RetainedRow: Sendable, Hashable {
    let table: String
    /// Values by lowercased column name; `nil` for a one-column key.
    let columns: [String: DatabaseValue]?
    let single: DatabaseValue?

    /// The row of `table` whose one-column primary key (or rowid) is `key`.
    public init(table: String, key: some DatabaseValueConvertible) {
        self.table = table
        self.columns = nil
        self.single = key.databaseValue
    }

    /// The row of `table` whose primary key columns have these values
    /// (`["feed": url, "id": guid]`).
    public init(table: String, key: [String: (any DatabaseValueConvertible)?]) {
        self.table = table
        self.columns = Dictionary(key.map { ($0.key.lowercased(), $0.value?.databaseValue ?? .null) }, uniquingKeysWith: { first, _ in first })
        self.single = nil
    }

    /// The key's values in the order of `keyColumns`, or `nil` if they do not match.
    func key(in keyColumns: [String]) -> [DatabaseValue]? {
        if let single { return keyColumns.count == 1 ? [single] : nil }
        guard let columns, columns.count == keyColumns.count else { return nil }
        var values: [DatabaseValue] = []
        for column in keyColumns {
            guard let value = columns[column.lowercased()] else { return nil }
            values.append(value)
        }
        return values
    }
}
