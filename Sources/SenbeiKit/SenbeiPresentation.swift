import Depot
import DepotStore
import Foundation
import SyncStatusText

/// Turns Senbei's state into terminal text. In SenbeiKit so tests can call it;
/// the `senbei` command prints what it returns.
public enum SenbeiPresentation {
    /// A page of a list: a heading with where it came from, then one line per record.
    ///
    /// ```
    /// Contacts · page 2 of 3 (60 in all) · from the cache, synced 2 min ago
    ///   #21  Ann Smith            ann.smith@example.com       Hooli
    /// ```
    public static func pageLines(_ page: EntityPage, now: Date) -> [String] {
        let info = page.info
        var heading = "\(info.kind.rawValue.capitalized) · page \(info.page) of \(info.pageCount) (\(info.total) in all)"
        switch page.source {
        case .network: heading += " · from the server"
        case .cache: heading += " · from the cache" + (page.lastSynced.map { ", synced \(relative($0, now: now))" } ?? "")
        case .offline: heading += " · " + offlineNote(lastSynced: page.lastSynced, now: now)
        }
        var lines = [heading]
        lines += page.items.map { "  " + entityLine($0, state: page.states[$0.id]) }
        if page.items.isEmpty { lines.append("  (nothing on this page)") }
        return lines
    }

    /// A list loaded page by page (`senbei contacts --more`): a heading with
    /// how far it got and what comes next, then every row.
    public static func scrollLines(_ kind: EntityKind, rows: [Entity], pageCount: Int, hasMore: Bool, error: DepotError?, states: [Int: RecordState] = [:]) -> [String] {
        var heading = "\(kind.rawValue.capitalized) · \(rows.count) shown, \(pageCount) \(pageCount == 1 ? "page" : "pages") loaded"
        if let error, [.offline, .connectionLost, .timedOut].contains(error.code) {
            heading += hasMore ? " · offline — more on the server, not loaded" : " · offline — that is all"
        } else if let error {
            heading += " · more not loaded: \(error.plainFailure(app: "senbei").clause)"
        } else {
            heading += hasMore ? " · more on the server: senbei \(kind.rawValue) --more" : " · that is all"
        }
        var lines = [heading]
        lines += rows.map { "  " + entityLine($0, state: states[$0.id]) }
        if rows.isEmpty { lines.append("  (nothing loaded yet)") }
        return lines
    }

    /// What a list shown from the cache says when the server could not be asked:
    /// `offline — showing cached data from 14:02 (1 h ago)`.
    public static func offlineNote(lastSynced: Date?, now: Date) -> String {
        "offline — showing cached data" + (lastSynced.map { " from \(SyncStatus.State.clockTime($0)) (\(relative($0, now: now)))" } ?? "")
    }

    /// The lines of `rows` from `lines`, after an offline note when they came from the cache.
    public static func lines<Row>(_ rows: CachedRows<Row>, now: Date, _ lines: ([Row]) -> [String]) -> [String] {
        (rows.source == .offline ? [offlineNote(lastSynced: rows.lastSynced, now: now)] : []) + lines(rows.rows)
    }

    /// One record: its identifier, name, e-mail and company in columns. A
    /// record created here and not yet sent says so instead of an identifier
    /// and a company: `new    Zoe Quinn … ◌ sending…`. A contact with an edit
    /// waiting (`state`) is marked `◌ saving…`, one in conflict `⚠ conflict`.
    public static func entityLine(_ entity: Entity, state: RecordState? = nil) -> String {
        let id = pad(identifier(entity.id, entity.pending), 7)
        let name = pad(entity.name, 32)
        let email = pad(entity.email ?? "", 30)
        let mark: String? = entity.pending.map(mark) ?? (state?.hasConflict == true ? "⚠ conflict" : state?.hasPendingWrites == true ? "◌ saving…" : nil)
        return (id + name + email + (mark ?? entity.company ?? "")).trimmingTrailingSpaces
    }

    /// The conflicts kept for the user, one line per field:
    /// `#4 contact #7 email: ann@a.io → ann@b.io | ann@c.io`, or for a
    /// contact deleted on the server, `#4 contact #7 was deleted on the server (your edit: name: Ann → Anna)`.
    public static func conflictLines(_ conflicts: [OutboxConflict]) -> [String] {
        guard !conflicts.isEmpty else { return ["No conflicts: every edit reached the server or waits to be sent."] }
        let heading = conflicts.count == 1 ? "1 edit in conflict" : "\(conflicts.count) edits in conflict"
        var lines = [heading + " (resolve each with --keep-mine ID, --keep-theirs ID or --set ID FIELD VALUE):"]
        for conflict in conflicts {
            let what = "\(conflict.id) " + (conflict.record.map { "\($0.kind) #\($0.id)" } ?? conflict.typeName)
            if conflict.isDeletedOnServer {
                let edits = conflict.fields.map { "\($0.field): \(value($0.base)) → \(value($0.mine))" }.joined(separator: ", ")
                lines.append("  \(what) was deleted on the server" + (edits.isEmpty ? "" : " (your edit: \(edits))"))
            } else {
                lines += conflict.fields.map { "  \(what) \($0.field): \(value($0.base)) → \(value($0.mine)) | \(value($0.theirs))" }
            }
        }
        return lines
    }

    /// A field's value in a conflict line: the text, or `(none)`.
    private static func value(_ text: String?) -> String { text ?? "(none)" }

    /// How a pending change is marked in the lists: `◌ sending…`,
    /// `◌ marking done…`, `◌ deleting…`.
    public static func mark(_ change: PendingChange) -> String {
        switch change {
        case .create: "◌ sending…"
        case .complete: "◌ marking done…"
        case .delete: "◌ deleting…"
        }
    }

    /// `#12`, or `new` for a record created here (its identifier is temporary).
    private static func identifier(_ id: Int, _ pending: PendingChange?) -> String {
        pending == .create ? "new" : "#\(id)"
    }

    /// What a change that could not be sent yet says:
    /// `Task "Call Ann" queued: will be sent when online (outbox entry #3).`
    ///
    /// - Parameters:
    ///   - what: The change, as a sentence's subject (`Task "Call Ann"`).
    ///   - entry: Its outbox entry.
    public static func queuedLine(_ what: String, entry: OutboxEntry.ID) -> String {
        "\(what) queued: will be sent when online (outbox entry \(entry))."
    }

    /// A change the server refused after it was queued, in one sentence:
    /// `Not saved: new task " ": name can't be blank.`
    public static func rejectionLine(_ rejected: RejectedChange) -> String {
        "Not saved: \(rejected.summary): \(rejected.reason)" + (rejected.reason.hasSuffix(".") ? "" : ".")
    }

    /// The outbox: a count, then one line per entry (its number, state, type,
    /// lane, attempts and last error).
    ///
    /// ```
    /// 2 changes in the outbox:
    ///   #1  pending  senbei.newTask.v1  lane senbei.task.new-17652…  0 attempts
    ///   #2  failed   senbei.newTask.v1  lane senbei.task.new-17653…  0 attempts  last error: it cannot be rebuilt: …
    /// ```
    public static func outboxLines(_ entries: [OutboxEntry]) -> [String] {
        guard !entries.isEmpty else { return ["The outbox is empty: every change was sent."] }
        let heading = entries.count == 1 ? "1 change in the outbox:" : "\(entries.count) changes in the outbox:"
        let typeWidth = (entries.map(\.typeName.count).max() ?? 0) + 2
        let laneWidth = (entries.map(\.lane.count).max() ?? 0) + 7
        return [heading] + entries.map { entry in
            let attempts = entry.attempts == 1 ? "1 attempt" : "\(entry.attempts) attempts"
            let line = "  " + pad("\(entry.id)", 5) + pad("\(entry.state)", 9) + pad(entry.typeName, typeWidth) + pad("lane \(entry.lane)", laneWidth) + attempts
            return line + (entry.lastError.map { "  last error: \($0)" } ?? "")
        }
    }

    /// Search results: a count line, then one line per contact.
    public static func searchLines(_ matches: ContactMatches) -> [String] {
        let count = matches.total == 1 ? "1 contact matches" : "\(matches.total) contacts match"
        var lines = ["\(count) \"\(matches.query)\"" + (matches.total > matches.contacts.count ? " (first \(matches.contacts.count) shown)" : "")]
        lines += matches.contacts.map { "  " + entityLine($0) }
        return lines
    }

    /// The task list under its bucket headings, as `TaskBuckets` groups it.
    ///
    /// ```
    /// Overdue
    ///   #1  Call Ann Smith (due 2025-12-29)
    /// Due ASAP
    ///   #11  Send quote
    ///   new  Send the contract  ◌ sending…
    /// ```
    public static func taskLines(_ groups: [TaskGroup]) -> [String] {
        guard !groups.isEmpty else { return ["No open tasks."] }
        var lines: [String] = []
        for group in groups {
            lines.append("\(group.bucket.title) (\(group.tasks.count))")
            for task in group.tasks {
                let line = "  " + pad(identifier(task.id, task.pending), 7) + task.name + (task.due.map { " (due \($0))" } ?? "")
                lines.append(line + (task.pending.map { "  " + mark($0) } ?? ""))
            }
        }
        return lines
    }

    /// The comments on a record, oldest first.
    public static func commentLines(_ comments: [CRMComment], on subject: Commentable) -> [String] {
        guard !comments.isEmpty else { return ["No comments on \(subject)."] }
        return ["Comments on \(subject):"] + comments.map { comment in
            "  " + pad(identifier(comment.id, comment.pending), 8) + comment.text + (comment.pending.map { "  " + mark($0) } ?? "")
        }
    }

    /// The activity stream, newest first.
    public static func activityLines(_ activities: [CRMActivity]) -> [String] {
        guard !activities.isEmpty else { return ["No activity yet."] }
        return activities.map { "  " + pad($0.action, 11) + $0.subject }
    }

    /// One sentence for a failure, for people: the server's own words for a
    /// refused change, "bad username or password" for a refused sign-in, "signed
    /// out" for a session the server ended, and what happened and what to do
    /// for anything else (``SyncStatusText/PlainFailure``): never an
    /// operation's name or SQLite's message.
    ///
    /// - Parameters:
    ///   - error: The failure.
    ///   - server: The server's URL, named when it cannot be reached.
    ///   - activity: What senbei was doing with its cache, for a storage failure.
    ///   - cacheFile: The cache's path, named where it helps.
    public static func message(for error: DepotError, server: URL? = nil, while activity: CacheActivity = .reading, cacheFile: String? = nil) -> String {
        let place = server.map { " at \($0.absoluteString)" } ?? ""
        switch error.code {
        case .unauthorized where SenbeiApp.isRefusedSignIn(error):
            return "Login failed: bad username or password."
        case .unauthorized:
            return "Signed out: the server ended the session; sign in again."
        case .offline, .connectionLost:
            return "Cannot reach the Senbei server\(place)."
        case .timedOut:
            return "The Senbei server\(place) did not answer in time."
        default:
            if let reasons = error.validationErrors {
                // The server's own words, as it wrote them: "name can't be blank".
                return error.status == 422 ? "Not saved: \(reasons.description)." : sentence(reasons.description)
            }
            return error.plainFailure(app: "senbei", while: activity, cacheFile: cacheFile).description
        }
    }

    /// How long ago `date` was: `just now`, `5 min ago`, `3 h ago`, `2 days ago`.
    public static func relative(_ date: Date, now: Date) -> String {
        SyncStatus.State.relative(date, now: now)
    }

    /// `text` padded with spaces to `width` characters (or cut, with an ellipsis, to fit).
    public static func pad(_ text: String, _ width: Int) -> String {
        if text.count >= width { return String(text.prefix(max(0, width - 2))) + "… " }
        return text + String(repeating: " ", count: width - text.count)
    }

    private static func sentence(_ text: String) -> String {
        guard let first = text.first else { return text }
        let capitalized = first.uppercased() + text.dropFirst()
        return capitalized.hasSuffix(".") ? capitalized : capitalized + "."
    }
}

extension String {
    var trimmingTrailingSpaces: String {
        var text = self
        while text.last == " " { text.removeLast() }
        return text
    }
}
