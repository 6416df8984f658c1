import Foundation
import Hummingbird
import NIOCore

extension FaultRoutes {
    /// ``DemoServer/Fault/cacheHeaders(_:cacheControl:age:expires:)``: a
    /// small answer with the freshness headers a test asks for, and a 304 to
    /// a request that names its `ETag`, so a client's cache can be tested
    /// against every `Cache-Control`, `Age` and `Expires` it must heed.
    static func addCacheHeaders(to router: Router<DemoRequestContext>) {
        router.get("/faults/cache/:name") { request, _ in
            let query = request.uri.queryParameters
            func decoded(_ name: String) -> String? {
                query.get(name).map { $0.removingPercentEncoding ?? String($0) }
            }
            var headers: HTTPFields = [.eTag: DemoServer.cacheHeadersETag]
            if let cacheControl = decoded("cc") { headers[.cacheControl] = cacheControl }
            if let age = query.get("age", as: Int.self) { headers[.age] = "\(age)" }
            if let seconds = query.get("expiresIn", as: Int.self) {
                // Hummingbird stamps `Date` from the real clock after this
                // handler, so `Expires` is counted on the same clock.
                headers[.expires] = NerdfeedRoutes.httpDate(Date().addingTimeInterval(Double(seconds)))
            } else if let expires = decoded("expires") {
                headers[.expires] = expires
            }
            if request.headers[.ifNoneMatch] == DemoServer.cacheHeadersETag {
                return Response(status: .notModified, headers: headers)
            }
            var response = hello()
            response.headers.append(contentsOf: headers)
            return response
        }
    }
}
