import Depot
import DepotAsyncHTTPClient
import Foundation

// Sources/Depot/Depot.docc/GettingStarted.md

struct Contact: Codable, Sendable, Equatable {
    var id: Int
    var name: String
}

/// A page of a list, as the server sends it: `{"items": [...], "page": 1, "total": 40}`.
struct Page<Item: Decodable & Sendable>: Decodable, Sendable {
    var items: [Item]
}

struct FetchContacts: NetworkOperation {
    var page = 1
    var request: NetworkRequest { .get("/contacts", query: ["page": "\(page)"]) }
    var priority: Priority { .high }

    func process(_ response: NetworkResponse, context: OperationContext) async throws -> [Contact] {
        try response.decode(Page<Contact>.self).items
    }
}

struct SearchContacts: NetworkOperation {
    var query: String
    var request: NetworkRequest { .get("contacts/search", query: ["q": query]) }
    var offlineBehavior: OfflineBehavior { .failFast }   // useless later

    func process(_ response: NetworkResponse, context: OperationContext) async throws -> [Contact] {
        try response.decode([Contact].self)
    }
}

struct PublishPost: NetworkOperation {
    var text: String
    var request: NetworkRequest { .post("posts", json: ["text": text]) }
    var exitPolicy: ExitPolicy { .finish }      // at exit, it gets the grace period
}

enum GettingStartedExamples {
    static func makeTheController() -> NetworkController {
        let controller = NetworkController(configuration: .init(
            baseURL: URL(string: "https://crm.example.com/api")!,
            transport: AsyncHTTPClientTransport(),      // on Linux; URLSessionTransport() is the default
            adapters: [
                DefaultHeaders(["Accept": "application/json"]),
                Credentials.basic(username: "ann", password: "secret", for: URL(string: "https://crm.example.com")!),
            ],
            limits: .init(concurrency: .fixed(4))
        ))
        return controller
    }

    static func scoped(api: URL) async throws -> [Contact] {
        let contacts = try await withNetworkController(.init(baseURL: api)) { controller in
            try await controller.perform(FetchContacts())
        }
        return contacts
    }

    @MainActor static func enqueueOrPerform(controller: NetworkController, refreshControl: RefreshControl) async throws {
        // Pull to refresh: the completion runs once, on the main actor, always asynchronously.
        let ticket = controller.enqueue(FetchContacts()) { result in
            refreshControl.endRefreshing()
        }

        // Or in async code; cancelling the task cancels the operation.
        let contacts = try await controller.perform(FetchContacts(page: 2))
        _ = (ticket, contacts)
    }

    @MainActor final class SearchScreen {
        let controller: NetworkController
        var currentSearch: Ticket?
        private(set) var shown: Result<[Contact], DepotError>?

        init(controller: NetworkController) { self.controller = controller }

        func show(_ result: Result<[Contact], DepotError>) { shown = result }

        func search(_ text: String) {
            currentSearch?.cancel()
            currentSearch = controller.enqueue(SearchContacts(query: text)) { [weak self] ticket, result in
                guard let self, ticket == self.currentSearch else { return }   // a stale answer
                self.show(result)
            }
        }
    }

    static func controlAndExit(controller: NetworkController) async {
        controller.pause(category: .images)          // nothing new starts in it
        controller.cancel(category: .images)         // queued and running ones end
        let post = controller.enqueue(PublishPost(text: "hi"))   // exitPolicy .finish
        let report = await controller.shutdown(grace: .seconds(5))
        print(report)   // shutdown: 1 finished, 0 failed, 12 cancelled
        _ = post
    }
}
