import Depot
import Foundation

// Sources/Depot/Depot.docc/Authentication.md

enum AuthenticationExamples {
    struct MaintenanceWindow: ResponseInterceptor {
        func intercept(_ attempt: InterceptedAttempt, context: InterceptorContext) async -> InterceptorDecision {
            guard case .failure(let error) = attempt.outcome, error.status == 503,
                  attempt.responseHeaders["X-Maintenance"] != nil else { return .proceed }
            return .fail(DepotError(.server, operation: attempt.operationName, status: 503, detail: "down for maintenance"))
        }
    }

    static func signIn() async throws -> NetworkController {
        let server = URL(string: "https://crm.example.com")!
        let tokens = OAuth2TokenEndpoint(url: server.appending(path: "oauth/token"), clientID: "senbei")
        let authenticator = TokenAuthenticator(for: server, refresher: .oauth2(tokens))
        var configuration = NetworkController.Configuration(baseURL: server)
        configuration.authenticator = authenticator
        let controller = NetworkController(configuration: configuration)

        let credential = try await controller.perform(tokens.passwordGrant(username: "ann", password: "secret"))
        await authenticator.signIn(credential)

        let storage = InMemoryCredentialStorage()
        let remembered = TokenAuthenticator(for: server, refresher: .oauth2(tokens), storage: storage, refreshWindow: .seconds(120))
        _ = remembered

        configuration.interceptors = [MaintenanceWindow()]
        return controller
    }
}

func watchSignOut(_ controller: NetworkController, showSignIn: @escaping @Sendable () -> Void) -> Task<Void, Never> {
    Task {
        for await event in controller.events() where event.kind == .signedOut {
            showSignIn()
        }
    }
}
