import GRDB

/// A record that lists its columns once and its values in that order, so
/// that a ``BulkUpsert`` of many of them spends no dictionary per record.
///
/// Any GRDB record works with ``BulkUpsert``; this protocol is for the large
/// writes, where GRDB's `encode(to:)` into a keyed container costs more than
/// the writes themselves (a million feed items: a third of the CPU).
/// The contract: ``encodeValues(into:)`` appends exactly one value per
/// column of ``encodedColumns``, in that order, and the values are those
/// `encode(to:)` gives. Let `encode(to:)` use the same two lists, and they
/// cannot drift apart.
///
/// For example:
///
/// ```swift
/// extension Song: BulkEncodableRecord {
///     static let encodedColumns = [Columns.id, Columns.title, Columns.isStarred]
///
///     func encodeValues(into values: inout [DatabaseValue]) {
///         values.append(id.databaseValue)
///         values.append(title.databaseValue)
///         values.append(isStarred.databaseValue)
///     }
///
///     func encode(to container: inout PersistenceContainer) {
///         encodeColumns(to: &container)
///     }
/// }
/// ```
public protocol BulkEncodableRecord: EncodableRecord, TableRecord {
    /// The columns the record writes, in the order of ``encodeValues(into:)``.
    static var encodedColumns: [Column] { get }

    /// Appends the record's values, one per column of ``encodedColumns``, in order.
    ///
    /// - Parameter values: The values of the records before this one.
    func encodeValues(into values: inout [DatabaseValue])
}

extension BulkEncodableRecord {
    /// Writes ``encodedColumns`` and ``encodeValues(into:)`` into GRDB's
    /// container: the body of `encode(to:)`, so that the record lists its
    /// columns once.
    ///
    /// For example:
    ///
    /// ```swift
    /// func encode(to container: inout PersistenceContainer) { encodeColumns(to: &container) }
    /// ```
    ///
    /// - Parameter container: The container `encode(to:)` was given.
    public func encodeColumns(to container: inout PersistenceContainer) {
        var values: [DatabaseValue] = []
        values.reserveCapacity(Self.encodedColumns.count)
        encodeValues(into: &values)
        for (column, value) in zip(Self.encodedColumns, values) { container[column] = value }
    }
}
