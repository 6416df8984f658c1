import Depot
import DepotStore
import Foundation
import GRDB

/// The user's changes: queued durably in the outbox, shown in the cache at
/// once, sent when they can be, and announced when the server has decided.
extension SenbeiApp {
    // MARK: - The outbox

    /// Every change type Senbei queues, registered with the outbox in one
    /// place, so that a launch can rebuild what an earlier one queued. Keep a
    /// type here while entries of it may be queued, even after a `.v2` replaces it.
    public static let mutationTypes: [any Mutation.Type] = [
        CreateTask.self, MarkTaskDone.self, PostComment.self, DeleteComment.self, CreateContact.self, EditContact.self, DeleteContact.self,
    ]


    /// How long ``outcome(of:within:)`` waits for the server by default: three seconds.
    public static let sendGrace: Duration = .seconds(3)

    /// Starts sending what earlier launches queued (as soon as someone is signed in).
    public func start() async throws(DepotError) {
        try await outbox.start()
    }

    /// After a sign-in: lanes a 401 held go again, and so do the changes a
    /// refused sign-in cancelled.
    func resumeChanges() async {
        await outbox.resumeHeld()
        if changesStopped {
            changesStopped = false
            try? await outbox.start()
        }
    }

    /// Ends the session: the controller's shutdown, then the outbox's loops.
    ///
    /// Changes being sent get the grace period. Changes that cannot be sent
    /// now (nobody is signed in, the session ended, or there is no network)
    /// are not waited for: they stay queued, for the next launch.
    public func shutdown(grace: Duration) async -> ShutdownReport {
        if profile == nil || authenticator.isSignedOut || controller.connectionSnapshot.quality == .offline {
            controller.cancel(category: .senbei)
        }
        let report = await controller.shutdown(grace: grace)
        await outbox.waitUntilIdle()
        return report
    }

    // MARK: - Changes

    /// Creates a task (due "as soon as possible" without `due`): queued durably,
    /// and in ``CRMTask/open`` at once, pending. Posts `senbeiDidCreateTask`
    /// once the server accepted it.
    /// - Parameter due: `yyyy-MM-dd`; the server refuses other forms with a 422.
    public func createTask(name: String, due: String? = nil) async throws(DepotError) -> QueuedChange<CRMTask> {
        try await queue(CreateTask(name: name, due: due, localID: nextLocalID()))
    }

    /// Marks a task done: queued durably, and marked pending in the cache at
    /// once. Posts `senbeiDidMarkTaskAsDone` once the server accepted it.
    public func markTaskDone(id: Int) async throws(DepotError) -> QueuedChange<CRMTask> {
        try await queue(MarkTaskDone(id: id, localID: nextLocalID()))
    }

    /// Creates a contact: queued durably, and at the top of page 1 at once,
    /// pending. Posts `senbeiDidCreateContact` once the server accepted it.
    public func createContact(name: String, email: String? = nil) async throws(DepotError) -> QueuedChange<Entity> {
        try await queue(CreateContact(name: name, email: email, localID: nextLocalID()))
    }

    /// Posts a comment on `subject`: queued durably, and listed at once,
    /// pending. Posts `senbeiDidPostComment` once the server accepted it.
    public func postComment(on subject: Commentable, text: String) async throws(DepotError) -> QueuedChange<CRMComment> {
        try await queue(PostComment(on: subject, text: text, localID: nextLocalID()))
    }

    /// Deletes a comment: queued durably, and marked pending in the cache at
    /// once. Posts `senbeiDidDeleteComment` once the server accepted it.
    public func deleteComment(id: Int) async throws(DepotError) -> QueuedChange<Int> {
        try await queue(DeleteComment(id: id, localID: nextLocalID()))
    }

    /// Edits contact `id`: `change` turns the cached fields into the new ones.
    /// Queued durably with the version the cache holds (sent as `If-Match`),
    /// and shown in the cache at once, pending. Posts `senbeiDidEditContact`
    /// once the server accepted it, merged with other writers' changes to
    /// other fields; a field someone else changed too becomes a conflict
    /// (``conflicts()``).
    ///
    /// A contact the cache does not hold, or holds without a version, is
    /// fetched first (so that needs the network once).
    ///
    /// - Throws: `.invalidRequest` for a contact created here and not sent
    ///   yet, or an edit that changes nothing.
    public func editContact(id: Int, _ change: (ContactFields) throws(DepotError) -> ContactFields) async throws(DepotError) -> QueuedChange<Entity> {
        let (contact, version) = try await versionedContact(id)
        let base = ContactFields(contact)
        let mine = try change(base)
        guard mine != base else { throw DepotError(.invalidRequest, detail: "the edit changes nothing: contact #\(id) already has those values") }
        return try await queue(EditContact(id: id, version: version, base: base, mine: mine, localID: nextLocalID()))
    }

    /// Deletes contact `id`: queued durably with the version the cache holds,
    /// and marked as being deleted at once. If someone changed the contact on
    /// the server first, the deletion is given up and the contact stays, as
    /// they left it. Posts `senbeiDidDeleteContact` once the server agreed.
    public func deleteContact(id: Int) async throws(DepotError) -> QueuedChange<Int> {
        let (contact, version) = try await versionedContact(id)
        return try await queue(DeleteContact(id: id, version: version, fields: ContactFields(contact), localID: nextLocalID()))
    }

    /// The cached contact `id` and the version it is at, fetching it first if
    /// the cache does not know the version.
    private func versionedContact(_ id: Int) async throws(DepotError) -> (Entity, RecordVersion) {
        guard id > 0 else { throw DepotError(.invalidRequest, detail: "contact #\(id) is not on the server yet: wait until it is sent") }
        // The fields and the version from the same row: an edit is based on
        // the version its fields are.
        let cached = try await store.read { db in try Entity.fetchOne(db, key: ["kind": EntityKind.contacts.rawValue, "id": id]) }
        if let contact = cached, let version = contact.version { return (contact, RecordVersion(version)) }
        if profile == nil { _ = try await login() }
        let fetched = try await controller.perform(FetchContact(id: id))
        guard let version = fetched.version else {
            throw DepotError(.decoding, operation: "FetchContact", detail: "the server gave no version for contact #\(id)")
        }
        return (fetched, RecordVersion(version))
    }

    /// The edits kept for the user because someone else changed the same
    /// fields first (or deleted the contact), oldest first.
    public func conflicts() async throws(DepotError) -> [OutboxConflict] {
        try await outbox.conflicts()
    }

    /// Resolves conflict `id` by keeping the user's values (sent again on the
    /// server's version) or the server's (the edit is given up).
    public func resolveConflict(_ id: OutboxEntry.ID, keeping side: ConflictSide) async throws(DepotError) {
        try await outbox.resolveConflict(id, keeping: side)
    }

    /// Resolves conflict `id` with the user's values for the fields the edit
    /// changed and the server's for the others, except `field`, which becomes
    /// `value` (`nil` clears it); sent again on the server's version.
    public func resolveConflict(_ id: OutboxEntry.ID, setting field: String, to value: String?) async throws(DepotError) {
        guard let conflict = try await conflicts().first(where: { $0.id == id }) else {
            throw DepotError(.invalidRequest, detail: "there is no conflict \(id)")
        }
        let mine = try conflict.keepingMine(as: ContactFields.self)
        try await outbox.resolveConflict(id, with: try mine.setting(field, to: value))
    }

    /// Waits for the server's answer to `change`, signing in first if nobody is.
    ///
    /// - Returns: `.sent` with the record once the server accepted it;
    ///   `.queued` when it cannot be sent now (the server cannot be reached,
    ///   it asked to wait, or `grace` passed): it stays in the outbox.
    /// - Throws: The server's refusal (a 422's ``Depot/DepotError/validationErrors``,
    ///   a 404), after its rollback; or a refused sign-in (the change stays queued).
    public func outcome<Record: Sendable>(of change: QueuedChange<Record>, within grace: Duration = SenbeiApp.sendGrace) async throws(DepotError) -> ChangeOutcome<Record> {
        if profile == nil, !change.watch.isDecided {
            do {
                try await login()
            } catch where Self.isUnreachable(error) {
                return .queued(change.entry)
            }
        }
        switch await change.watch.wait(within: grace, clock: controller.configuration.environment.clock) {
        case .decided(.success(let record)):
            guard let record = record as? Record else {
                throw DepotError(.processing, detail: "\(change.entry) answered \(type(of: record)), not \(Record.self)")
            }
            return .sent(record)
        case .decided(.failure(let error)):
            // Told to the caller now: not kept for later.
            if let localID = change.watch.localID {
                _ = try? await store.write { db in try RejectedChange.deleteOne(db, key: localID) }
            }
            throw error
        case .waiting, .stalled:
            return .queued(change.entry)
        }
    }

    /// Puts an outbox entry back in its lane (a failed one, or a pending one
    /// to try now) and follows it; ``outcome(of:within:)`` waits for its answer
    /// (the server's response). A refusal is also kept in ``rejectedChanges()``.
    public func retry(_ entry: OutboxEntry.ID) async throws(DepotError) -> QueuedChange<NetworkResponse> {
        let watch = try await watch(localID: nil, start: { () async throws(DepotError) in
            try await self.outbox.retry(entry)
            return entry
        }, resolve: { [weak self] outcome in
            switch outcome {
            case .success(let response):
                return .success(response)
            case .failure(let error):
                let error = SenbeiResponse.enrich(error, operation: nil)
                self?.reportRefusal(error, operation: "Retry")
                return .failure(error)
            }
        })
        return QueuedChange(entry: entry, watch: watch)
    }

    /// The changes the server refused after they were queued, oldest first,
    /// until ``dismissRejectedChanges(_:)``.
    public func rejectedChanges() async throws(DepotError) -> [RejectedChange] {
        try await store.read { db in try RejectedChange.order(Column("id") < 0, abs(Column("id"))).fetchAll(db) }
    }

    /// Forgets refusals once they were shown.
    public func dismissRejectedChanges(_ rejected: [RejectedChange]) async throws(DepotError) {
        let ids = rejected.map(\.id)
        _ = try await store.write { db in try RejectedChange.deleteAll(db, keys: ids) }
    }

    // MARK: - Queuing and following

    /// A new ``SenbeiMutation/localID``.
    func nextLocalID() -> Int {
        LocalID.next(at: controller.configuration.environment.date())
    }

    /// Queues `mutation` and follows it; once decided, posts its notification
    /// (or `senbeiDidFailWithError`) whether or not anyone waits for it.
    func queue<M: SenbeiMutation>(_ mutation: M) async throws(DepotError) -> QueuedChange<M.Record> {
        let watch = try await watch(localID: mutation.localID, start: { () async throws(DepotError) in
            try await self.outbox.send(mutation).id
        }, resolve: { [weak self] outcome in
            guard let self else { return outcome.map { $0 as any Sendable } }
            return await self.announce(mutation, outcome)
        })
        return QueuedChange(entry: watch.entry, watch: watch)
    }

    /// Subscribes to the outbox's changes, then queues or puts back the
    /// entry (`start`), so that the watch sees every step from there on.
    private func watch(
        localID: Int?,
        start: () async throws(DepotError) -> OutboxEntry.ID,
        resolve: @escaping @MainActor (Result<NetworkResponse, DepotError>) async -> Result<any Sendable, DepotError>
    ) async throws(DepotError) -> ChangeWatch {
        let changes = outbox.changes()
        let entry = try await start()
        let watch = ChangeWatch(entry: entry, localID: localID)
        watch.follow(changes, outbox: outbox, resolve: resolve)
        return watch
    }

    /// What the outbox decided for `mutation`, as the app tells it.
    private func announce<M: SenbeiMutation>(_ mutation: M, _ outcome: Result<NetworkResponse, DepotError>) async -> Result<any Sendable, DepotError> {
        switch outcome {
        case .success(let response):
            do {
                let record = try await store.read { db in try mutation.record(from: response, db) }
                post(M.didCommit, payload: record, entity: mutation.entity(of: record))
                return .success(record)
            } catch {
                reportRefusal(error, operation: M.operationName)
                return .failure(error)
            }
        case .failure(let error):
            let error = SenbeiResponse.enrich(error, operation: M.operationName)
            reportRefusal(error, operation: M.operationName)
            return .failure(error)
        }
    }

    /// Posts `senbeiDidFailWithError` for a change that was not accepted
    /// (nothing for a discarded one). A refusal is never a failed sign-in: a
    /// 401 holds the change instead of deciding it.
    func reportRefusal(_ error: DepotError, operation: String) {
        guard error.code != .cancelled else { return }
        post(.senbeiDidFailWithError, error: error, operation: operation)
    }
}
