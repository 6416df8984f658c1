import Foundation

extension NetworkRequest {
    /// An HTTP method. Methods are case-sensitive (RFC 9110 §9.1); the standard ones are upper case.
    public struct Method: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The method token as sent, for example `GET`.
        public let rawValue: String
        /// A method with this exact token.
        public init(rawValue: String) { self.rawValue = rawValue }

        /// `GET`: read a resource.
        public static let get = Method(rawValue: "GET")
        /// `HEAD`: read a resource's headers only.
        public static let head = Method(rawValue: "HEAD")
        /// `POST`: create or submit.
        public static let post = Method(rawValue: "POST")
        /// `PUT`: replace.
        public static let put = Method(rawValue: "PUT")
        /// `PATCH`: change part of a resource.
        public static let patch = Method(rawValue: "PATCH")
        /// `DELETE`: remove.
        public static let delete = Method(rawValue: "DELETE")
        /// `OPTIONS`: ask what the server allows.
        public static let options = Method(rawValue: "OPTIONS")

        /// GET, HEAD, OPTIONS, PUT and DELETE are idempotent (RFC 9110 §9.2.2).
        public var isIdempotent: Bool {
            [.get, .head, .options, .put, .delete].contains(self)
        }

        public var description: String { rawValue }
    }
}
