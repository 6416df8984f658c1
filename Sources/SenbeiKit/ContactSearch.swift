import Depot
import DepotStore
import Foundation
import Observation

/// Search-as-you-type over contacts, with cancel-previous: each new query
/// cancels the search before it, and an answer is shown only if its ticket is
/// still the current one.
///
/// The two halves of the rule do different jobs. Cancelling the previous
/// ticket saves the network: a queued search never goes out, and a running one
/// is aborted. The identity check (`ticket == currentTicket`) is what makes the
/// screen right: an answer already on its way to the main actor when the next
/// key was typed is dropped there, so results never go back to an older query.
///
/// It follows the app's live feed (``SenbeiApp/live``): when a contact
/// reaches the cache from another client (or a full sync), the current query
/// is searched again at once, so a new match shows without a keystroke. Hold
/// a watch of the feed (`app.live.watch()`) while the search is on screen.
///
/// For example:
///
/// ```swift
/// let search = ContactSearch(app: app)
/// search.update(query: "an")
/// search.update(query: "ann")          // cancels "an"
/// // later: search.matches?.query == "ann"
/// ```
@MainActor
@Observable
public final class ContactSearch {
    /// The text typed so far.
    public private(set) var query = ""
    /// The answer to the last search that was current when it arrived: its
    /// ``ContactMatches/query`` may trail ``query`` while a newer search runs.
    public private(set) var matches: ContactMatches?
    /// Whether the current query's search is still out.
    public private(set) var isSearching = false
    /// Why the current query's search failed, if it did.
    public private(set) var lastError: DepotError?
    /// The ticket of the search whose answer will be shown; `nil` when none is out.
    public private(set) var currentTicket: Ticket?

    @ObservationIgnored private let app: SenbeiApp
    @ObservationIgnored private let limit: Int
    @ObservationIgnored private var waiters: [CheckedContinuation<Void, Never>] = []
    @ObservationIgnored private var follower: Task<Void, Never>?

    /// Makes a search over `app`'s server.
    ///
    /// - Parameters:
    ///   - app: The app whose controller runs the searches (and whose sign-in they wait for).
    ///   - limit: How many matches to show.
    public init(app: SenbeiApp, limit: Int = FetchList.defaultPerPage) {
        self.app = app
        self.limit = limit
        follower = follow(app.live.events())
    }

    isolated deinit {
        follower?.cancel()
    }

    /// The matching contacts shown now.
    public var contacts: [Entity] { matches?.contacts ?? [] }

    /// Searches for `query`, cancelling the search before. An empty query
    /// (after trimming) clears the results and sends nothing.
    public func update(query: String) {
        currentTicket?.cancel()
        currentTicket = nil
        self.query = query
        lastError = nil
        let text = query.trimmingCharacters(in: .whitespaces)
        guard !text.isEmpty else {
            matches = nil
            isSearching = false
            wakeWaiters()
            return
        }
        isSearching = true
        // The completion always runs later on the main actor, so `currentTicket`
        // is assigned before any answer can be compared with it. (A search sent
        // with a token that expired or was replaced meanwhile is sent again by
        // the controller's authenticator: its answer is final.)
        let ticket = app.controller.enqueue(SearchContacts(query: text, limit: limit)) { [weak self] ticket, result in
            guard let self, ticket == self.currentTicket else { return }  // superseded: never shown
            self.finish(result)
        }
        currentTicket = ticket
        if app.profile == nil {
            // Searches wait in the paused category until someone signs in: sign in
            // now (joining a sign-in that runs), and show why when it is refused.
            let asked = query
            Task { [weak self] in
                do {
                    try await self?.app.login()
                } catch {
                    // Still this search on screen (its cancellation may have landed
                    // first): say why. The app has posted the login failure already.
                    guard let self, self.currentTicket == ticket || (self.currentTicket == nil && self.query == asked) else { return }
                    ticket.cancel()
                    self.currentTicket = nil
                    self.isSearching = false
                    self.lastError = DepotError.wrap(error, operation: SenbeiApp.loginName, fallback: .processing)
                    self.wakeWaiters()
                }
            }
        }
    }

    /// Adds `character` to the query and searches.
    public func type(_ character: Character) {
        update(query: query + String(character))
    }

    /// Removes the last character of the query and searches.
    public func deleteBackward() {
        update(query: String(query.dropLast()))
    }

    /// Searches the current query again, keeping what is shown until the
    /// answer comes; nothing happens while the query is empty. The live feed
    /// calls it when contacts change.
    public func refresh() {
        guard !query.trimmingCharacters(in: .whitespaces).isEmpty else { return }
        update(query: query)
    }

    /// Cancels the search that is out, keeping what is shown.
    public func cancel() {
        currentTicket?.cancel()
        currentTicket = nil
        isSearching = false
        wakeWaiters()
    }

    /// Returns once no search is out: the current query's answer (or failure)
    /// is shown, or the query was cleared or cancelled. For a one-shot search:
    ///
    /// ```swift
    /// search.update(query: "ann")
    /// await search.settled()
    /// print(search.contacts)
    /// ```
    public func settled() async {
        guard isSearching else { return }
        await withCheckedContinuation { waiters.append($0) }
    }

    /// Searches again whenever contacts changed in the cache through the live
    /// feed (a batch of changes is one search).
    private func follow(_ events: DepotStream<LiveFeedEvent<CRMChange>>) -> Task<Void, Never> {
        Task { [weak self] in
            for await event in events {
                switch event {
                case .applied(let changes):
                    let contacts = changes.contains { change in
                        switch change {
                        case .contact, .contactDeleted: true
                        case .task, .taskDeleted: false
                        }
                    }
                    if contacts { self?.refresh() }
                case .replaced:
                    self?.refresh()
                case .skipped:
                    break
                }
            }
        }
    }

    private func wakeWaiters() {
        let waiting = waiters
        waiters = []
        for waiter in waiting { waiter.resume() }
    }

    private func finish(_ result: Result<ContactMatches, DepotError>) {
        currentTicket = nil
        isSearching = false
        defer { wakeWaiters() }
        switch result {
        case .success(let found):
            matches = found
            app.post(.senbeiDidFindContacts, payload: found)
        case .failure(let error):
            lastError = error
            app.report(error, operation: "SearchContacts")
        }
    }
}
