import Foundation

extension DemoServer {
    /// A group of routes as `depot-server --help` and its startup banner list
    /// them: what they are for, and what they need to answer.
    public struct RouteGroup: Sendable {
        /// A short name: `feeds`, `crm`, `timeline`, ….
        public var name: String
        /// Who uses the group.
        public var purpose: String
        /// What a request must carry; `nil` when nothing is needed.
        public var authentication: String?
        /// One line per route or family of routes: method, path, what it answers.
        public var routes: [String]
        /// A GET path of the group that answers 2xx (with the group's
        /// authentication), for tests that check the list against the router;
        /// `nil` for a group of POST routes only.
        public var sample: String?
    }

    /// Every route group the server serves. Keep it in step with the route
    /// files (`NerdfeedRoutes`, `SenbeiRoutes`, `OAuthRoutes`, `TimelineRoutes`,
    /// `PagingRoutes`, `FaultRoutes`, `ControlRoutes`): a test asks the
    /// server for each group's sample.
    public static let routeGroups: [RouteGroup] = [
        RouteGroup(
            name: "feeds", purpose: "Nerdfeed's forum feed and top songs", authentication: nil,
            routes: [
                "GET  /forum/rss, /forum/atom  posts, newest first (?limit=N)",
                "GET  /topsongs/limit=N/json   top songs, iTunes' JSON shape",
            ],
            sample: "/forum/rss"),
        RouteGroup(
            name: "oauth", purpose: "Senbei's sign-in, OAuth 2", authentication: nil,
            routes: [
                "POST /oauth/token  grant_type=password (admin / secret)",
                "                   or grant_type=refresh_token; 400 invalid_grant",
            ],
            sample: nil),
        RouteGroup(
            name: "crm", purpose: "Senbei's CRM",
            authentication: "Bearer token from /oauth/token, or Basic admin / secret",
            routes: [
                "GET  /profile",
                "GET  /accounts, /contacts, /leads, /opportunities, /campaigns",
                "     ?page=N&per_page=M&query=Q",
                "POST /contacts {\"name\", \"email\"?}: 201 with the contact; 422 field errors",
                "GET  /contacts/:id  the contact; ETag: \"<version>\" (version: 1, 2, …)",
                "PATCH /contacts/:id {\"name\"?, \"email\"?, \"company\"?, \"phone\"?},",
                "DELETE /contacts/:id  need If-Match: \"<version>\": 200 (the next version)",
                "     or 204; 412 stale (the contact now); 428 no If-Match; 404",
                "     ?idempotency=ignored: a server that ignores Idempotency-Key;",
                "     ?stale=bare: a 412 without the contact (the client must GET it);",
                "     ?stale=409: a 409 with the contact instead of the 412",
                "GET  /comments?contact_id=ID, POST /comments, DELETE /comments/:id",
                "GET  /tasks, POST /tasks, PUT /tasks/:id/complete",
                "     POST /tasks?idempotency=ignored: ignores Idempotency-Key",
                "GET  /activities",
                "GET  /crm/events   contact and task changes, server-sent events",
                "GET  /crm/changes?since=N&limit=M  the same changes as JSON pages",
                "Writes honour Idempotency-Key: a repeated key replays the answer.",
            ],
            sample: "/contacts"),
        RouteGroup(
            name: "timeline", purpose: "Timeline's posts and avatars", authentication: nil,
            routes: [
                "GET  /timeline  newest first (?since=ID, ?before=ID, ?limit=N);",
                "                Change-Cursor: the change its snapshot is at",
                "GET  /timeline/events  changes as server-sent events (Last-Event-ID)",
                "GET  /timeline/changes?since=N&limit=M  changes as JSON pages",
                "POST /posts, DELETE /posts/:id  honour Idempotency-Key",
                "GET  /avatars/N.png  a PNG with an ETag; answers Range",
            ],
            sample: "/timeline"),
        RouteGroup(
            name: "paging", purpose: "45 items in three paging shapes", authentication: nil,
            routes: [
                "GET  /paging/items?limit=N, and cursor=C, page=N or before=ID",
                "     (?fault=repeat|empty|badcursor)",
                "POST /paging/items?count=N  new items on top",
            ],
            sample: "/paging/items"),
        RouteGroup(
            name: "ranges", purpose: "byte ranges, for delayable downloads", authentication: nil,
            routes: [
                "GET  /faults/bytes/:n  n bytes with an ETag; answers one Range",
                "     (?ranges=ignored|untagged|changing: servers that do not)",
                "GET  /avatars/N.png    answers one Range too",
            ],
            sample: "/faults/bytes/100"),
        RouteGroup(
            name: "faults", purpose: "what goes wrong, for tests", authentication: nil,
            routes: [
                "GET  /faults/status/:code, /faults/retry-after/:seconds (?date=1)",
                "GET  /faults/redirect-loop, /faults/redirects/:count,",
                "     /faults/redirect/cross-origin, /faults/redirect/https-to-http",
                "GET  /faults/drip?bytes=N&ms=M, /faults/reset-mid-body,",
                "     /faults/truncated, /faults/huge, /faults/hang",
                "GET  /faults/malformed-json?items=N, /faults/malformed-xml,",
                "     /faults/xml-billion-laughs, /faults/xml-external-entity",
                "GET  /faults/last-modified-only?count=N, /faults/feed, /faults/empty,",
                "     /faults/wrong-content-type, /faults/hello, /faults/echo/headers",
                "POST /faults/echo/body, /faults/gated/:gate",
            ],
            sample: "/faults/status/204"),
        RouteGroup(
            name: "control", purpose: "the link's conditions, changed at run time", authentication: nil,
            routes: [
                #"POST /_control  {"route", "latencyMs", "bandwidthKbps", "failRate","#,
                #"                 "offline", "dropResponses", "reset", "cutStreams","#,
                #"                 "cutStreamsMidEvent", "heartbeats", "changeHistory","#,
                #"                 "timelineChanges", "crmChanges"}"#,
            ],
            sample: nil),
        RouteGroup(
            name: "stats", purpose: "what the server did", authentication: nil,
            routes: [
                "GET  /_stats  requests per route, bytes sent, 304s, Idempotency-Keys",
            ],
            sample: "/_stats"),
    ]

    /// The route groups as text, every line shorter than 80 characters (help
    /// text wraps longer ones): a line per group, with what it needs to answer,
    /// then its routes, indented.
    public static var routeSummary: String {
        var lines = ["Routes (every GET also answers HEAD):"]
        for group in routeGroups {
            if let authentication = group.authentication {
                lines.append("  \(group.name): \(group.purpose); needs authentication:")
                lines.append("    \(authentication)")
            } else {
                lines.append("  \(group.name): \(group.purpose); no authentication")
            }
            for route in group.routes { lines.append("    \(route)") }
        }
        return lines.joined(separator: "\n")
    }

    /// What `depot-server` prints once it listens: the address, then ``routeSummary``.
    public static func banner(listeningOn url: URL) -> String {
        "depot-server listening on \(url.absoluteString)\n\(routeSummary)\n\n"
    }
}
