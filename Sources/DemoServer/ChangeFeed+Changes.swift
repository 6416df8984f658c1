import HTTPTypes
import Hummingbird
import NIOCore

extension ChangeFeed {
    /// The `Change-Cursor` response header: the feed's number current when a
    /// list route took its snapshot, to open the event stream with as `Last-Event-ID`.
    static var changeCursorHeader: HTTPField.Name { HTTPField.Name("Change-Cursor")! }

    /// How many changes a `/changes` page has when `limit` is not given.
    static var defaultPageLimit: Int { 500 }
    /// The most changes a `/changes` page has.
    static var maximumPageLimit: Int { 5_000 }

    /// Answers `GET …/changes?since=N&limit=M`: the changes after N in sequence
    /// order, at most M (default ``defaultPageLimit``, at most ``maximumPageLimit``).
    ///
    /// For example, the Timeline's:
    ///
    /// ```text
    /// {"changes":[{"seq":31,"change":"post","post":{…}},{"seq":32,"change":"delete","id":4}],"cursor":32,"more":false}
    /// ```
    ///
    /// `cursor` is the number of the page's last change (`since` when the page
    /// is empty, which is then the latest number); `more` says whether later
    /// changes exist. `since` missing, not an integer or negative answers 400;
    /// `since` older than the oldest kept change, or newer than the latest,
    /// answers 410 Gone: the client must fetch the list again. Both with
    /// `{"errors": {"since": ["…"]}}`.
    func changesResponse(to request: Request) throws -> Response {
        guard let since = request.uri.queryParameters.get("since", as: Int.self), since >= 0 else {
            return try SenbeiRoutes.invalidStatus(.badRequest, ["since": ["must be a change number (an integer, 0 or more)"]])
        }
        let limit = max(1, min(request.uri.queryParameters.get("limit", as: Int.self) ?? Self.defaultPageLimit, Self.maximumPageLimit))
        let (page, oldest, latest) = read { _, log in
            (log.changes(after: since, limit: limit), log.oldestResumable, log.sequence)
        }
        guard let page else {
            let reason = since > latest
                ? "is newer than the latest change (\(latest))"
                : "is older than the oldest change kept (resume after \(oldest) or later)"
            return try SenbeiRoutes.invalidStatus(.gone, ["since": ["change \(since) \(reason)"]])
        }
        var body = ByteBuffer(string: #"{"changes":["#)
        for (index, entry) in page.changes.enumerated() {
            if index > 0 { body.writeString(",") }
            body.writeString(#"{"seq":\#(entry.seq),"change":"\#(entry.change.event)",\#(try entry.change.entryMembers())}"#)
        }
        body.writeString(#"],"cursor":\#(page.cursor),"more":\#(page.more)}"#)
        return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: body))
    }
}
