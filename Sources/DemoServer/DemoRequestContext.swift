import Hummingbird
import NIOCore

/// The request context of DemoServer's routes: Hummingbird's basic context plus
/// the connection, so an offline window can close it without any answer.
struct DemoRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let channel: any Channel
    /// The request is a HEAD, routed as the GET it mirrors (see ``HeadResponder``).
    var answersHead = false

    init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.channel = source.channel
    }
}
