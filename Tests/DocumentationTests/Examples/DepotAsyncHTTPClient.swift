import Depot
import DepotAsyncHTTPClient
import Foundation

// Sources/DepotAsyncHTTPClient/DepotAsyncHTTPClient.docc/DepotAsyncHTTPClient.md

enum DepotAsyncHTTPClientExamples {
    static func onLinux(server: URL) -> NetworkController {
        let controller = NetworkController(configuration: .init(baseURL: server, transport: AsyncHTTPClientTransport()))
        return controller
    }
}
