import Depot
import Foundation

/// One field changed on both sides, to different values: what a kept
/// conflict shows the user. Values are as the record's JSON encoding gives
/// them: a string's text, a number or `true`, `nil` for a missing or null
/// field (or, for ``theirs``, a record deleted on the server).
public struct FieldConflict: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The field's coding key: `email`.
    public var field: String
    /// The value both sides started from.
    public var base: String?
    /// The value this device wrote.
    public var mine: String?
    /// The value on the server.
    public var theirs: String?

    /// Makes a field conflict.
    public init(field: String, base: String?, mine: String?, theirs: String?) {
        self.field = field
        self.base = base
        self.mine = mine
        self.theirs = theirs
    }

    /// `email: a@x → b@x | c@x`.
    public var description: String {
        "\(field): \(base ?? "(none)") → \(mine ?? "(none)") | \(theirs ?? "(none)")"
    }
}

/// The built-in three-way merge of `Codable` records, field by field (a
/// field is a top-level coding key; a nested value is one field):
///
/// | base → mine | base → theirs | merged |
/// |---|---|---|
/// | unchanged | unchanged or changed | theirs |
/// | changed | unchanged | mine |
/// | changed | changed to the same value | that value, no conflict |
/// | changed | changed to another value | a ``FieldConflict`` |
///
/// ```swift
/// switch try FieldMerge.merge(base: base, mine: mine, theirs: theirs) {
/// case .merged(let record): send(record)            // no field changed on both sides
/// case .conflicting(let fields): show(fields)       // email: a@x → b@x | c@x
/// }
/// ```
public enum FieldMerge {
    /// What a merge came to. Final on purpose: merged or not.
    public enum Outcome<Record: Sendable>: Sendable {
        /// Every field changed on one side only (or to the same value on
        /// both): the merged record.
        case merged(Record)
        /// Fields changed on both sides to different values.
        case conflicting([FieldConflict])
    }

    /// Merges `mine` and `theirs`, both made from `base`.
    ///
    /// - Throws: `.encoding` if a record does not encode to a JSON object;
    ///   `.decoding` if the merged fields do not decode as `Record`.
    public static func merge<Record: Codable & Sendable>(base: Record, mine: Record, theirs: Record) throws(DepotError) -> Outcome<Record> {
        let (b, m, t) = (try fields(of: base), try fields(of: mine), try fields(of: theirs))
        var merged = t
        var conflicts: [FieldConflict] = []
        for key in Set(b.keys).union(m.keys).union(t.keys).sorted() {
            let (old, ours, others) = (b[key], m[key], t[key])
            if ours == old { continue }
            if others == old || others == ours {
                merged[key] = ours
                continue
            }
            conflicts.append(FieldConflict(field: key, base: old?.text, mine: ours?.text, theirs: others?.text))
        }
        if !conflicts.isEmpty { return .conflicting(conflicts) }
        return .merged(try record(Record.self, from: merged))
    }

    /// `theirs` with every field `mine` changed from `base` set to mine's
    /// value: what "keep mine" sends, so that the fields only the other
    /// writer changed keep their change.
    ///
    /// - Throws: as ``merge(base:mine:theirs:)``.
    public static func keepingMine<Record: Codable & Sendable>(base: Record, mine: Record, theirs: Record) throws(DepotError) -> Record {
        let (b, m) = (try fields(of: base), try fields(of: mine))
        var merged = try fields(of: theirs)
        for key in Set(b.keys).union(m.keys) where m[key] != b[key] {
            merged[key] = m[key]
        }
        return try record(Record.self, from: merged)
    }

    /// Every field `mine` changed from `base`, with the value `theirs` has
    /// (`nil` for a record deleted on the server): what a conflict kept for
    /// a reason other than a field both sides changed lists (a deleted
    /// record, an edit that decided to keep it, or one rebased too often).
    public static func changes<Record: Codable & Sendable>(base: Record, mine: Record, theirs: Record?) throws(DepotError) -> [FieldConflict] {
        let (b, m) = (try fields(of: base), try fields(of: mine))
        let t = try theirs.map { record throws(DepotError) in try fields(of: record) }
        return Set(b.keys).union(m.keys).sorted().compactMap { key in
            guard m[key] != b[key] else { return nil }
            return FieldConflict(field: key, base: b[key]?.text, mine: m[key]?.text, theirs: t?[key]?.text)
        }
    }

    /// A field's value, as its canonical JSON text (sorted keys), so that
    /// two values compare by content.
    struct Value: Hashable {
        let json: String
        /// For people: a string's own text, otherwise its JSON.
        var text: String? {
            if json == "null" { return nil }
            guard json.hasPrefix("\""), let data = json.data(using: .utf8),
                  let string = try? JSONDecoder().decode(String.self, from: data) else { return json }
            return string
        }
    }

    /// The top-level fields of `record`'s JSON; a null field is left out, as
    /// a missing one is.
    static func fields<Record: Encodable>(of record: Record) throws(DepotError) -> [String: Value] {
        let object: [String: Any]
        do {
            let data = try JSONEncoder().encode(record)
            guard let decoded = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]) as? [String: Any] else {
                throw DepotError(.encoding, detail: "\(Record.self) does not encode to a JSON object, so it cannot be merged field by field")
            }
            object = decoded
        } catch let error as DepotError {
            throw error
        } catch {
            throw DepotError(.encoding, detail: "\(Record.self) could not be encoded for a merge", underlying: error)
        }
        var fields: [String: Value] = [:]
        for (key, value) in object where !(value is NSNull) {
            guard let data = try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .fragmentsAllowed]) else { continue }
            fields[key] = Value(json: String(decoding: data, as: UTF8.self))
        }
        return fields
    }

    /// Decodes `fields` as a `Record`.
    static func record<Record: Decodable>(_ type: Record.Type, from fields: [String: Value]) throws(DepotError) -> Record {
        let json = "{" + fields.sorted { $0.key < $1.key }.map { key, value in
            let name = (try? JSONSerialization.data(withJSONObject: key, options: [.fragmentsAllowed])).map { String(decoding: $0, as: UTF8.self) } ?? "\"\""
            return "\(name):\(value.json)"
        }.joined(separator: ",") + "}"
        do {
            return try JSONDecoder().decode(Record.self, from: Data(json.utf8))
        } catch {
            throw DepotError(.decoding, detail: "the merged fields do not decode as \(Record.self)", underlying: error)
        }
    }
}
