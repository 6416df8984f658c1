import Depot
import Foundation

// Every notification Senbei posts is declared in this file.
//
// ``SenbeiApp`` posts them on its `notificationCenter` (the controller's
// `Configuration.observability.notificationCenter`, else `NotificationCenter.default`), on
// the main actor, with the app as the object, after the cache holds the
// change. The userInfo keys are ``SenbeiNotification/UserInfoKey``:
//
// | name                                   | payload                          | entity                 | error        |
// |----------------------------------------|----------------------------------|------------------------|--------------|
// | `senbeiDidRetrieve{Accounts,Contacts,Leads,Opportunities,Campaigns}` | `EntityPage` | `EntityKind`   |              |
// | `senbeiDidRetrieveComments`            | `[CRMComment]`                   | `Commentable`          |              |
// | `senbeiDidRetrieveTasks`               | `[CRMTask]` (open tasks)         |                        |              |
// | `senbeiDidRetrieveActivities`          | `[CRMActivity]` (newest first)   |                        |              |
// | `senbeiDidFindContacts`                | `ContactMatches` (current search only) |                  |              |
// | `senbeiDidMarkTaskAsDone`              | `CRMTask` (completed)            | the task's id (`Int`)  |              |
// | `senbeiDidCreateTask`                  | `CRMTask`                        | the task's id (`Int`)  |              |
// | `senbeiDidCreateContact`               | `Entity`                         | the contact's id (`Int`) |            |
// | `senbeiDidPostComment`                 | `CRMComment`                     | `Commentable`          |              |
// | `senbeiDidDeleteComment`               | the comment's id (`Int`)         | the comment's id (`Int`) |            |
// | `senbeiDidEditContact`                 | `Entity` (as the server has it)  | the contact's id (`Int`) |            |
// | `senbeiDidDeleteContact`               | the contact's id (`Int`)         | the contact's id (`Int`) |            |
// | `senbeiDidLogin`                       | `Profile`                        |                        |              |
// | `senbeiDidFailLogin`                   |                                  |                        | `DepotError` (`.unauthorized`) |
// | `senbeiDidFailWithError`               |                                  |                        | `DepotError`; `operation` holds the operation's name |
//
// Lists are announced when they come from the server, not when a fresh cache
// answers. Cancellations are not failures: nothing is posted for them.
//
// Changes (the seven `senbeiDid…` for tasks, contacts and comments) are
// announced when the server accepted them, which may be long after the call
// that queued them returned (``SenbeiApp/createTask(name:due:)`` returns once
// the change is stored). A change the server refused posts
// `senbeiDidFailWithError`, with the change type's name (`CreateTask`) as
// `operation`, after its rollback. Only changes queued or retried by this
// process are announced: one an earlier launch queued shows in the cache when
// it is sent, and a refusal of it is kept in ``SenbeiApp/rejectedChanges()``.

extension Notification.Name {
    /// A page of accounts arrived from the server.
    public static let senbeiDidRetrieveAccounts = Notification.Name("SenbeiDidRetrieveAccounts")
    /// A page of contacts arrived from the server.
    public static let senbeiDidRetrieveContacts = Notification.Name("SenbeiDidRetrieveContacts")
    /// A page of leads arrived from the server.
    public static let senbeiDidRetrieveLeads = Notification.Name("SenbeiDidRetrieveLeads")
    /// A page of opportunities arrived from the server.
    public static let senbeiDidRetrieveOpportunities = Notification.Name("SenbeiDidRetrieveOpportunities")
    /// A page of campaigns arrived from the server.
    public static let senbeiDidRetrieveCampaigns = Notification.Name("SenbeiDidRetrieveCampaigns")
    /// The comments on a record arrived.
    public static let senbeiDidRetrieveComments = Notification.Name("SenbeiDidRetrieveComments")
    /// The open tasks arrived.
    public static let senbeiDidRetrieveTasks = Notification.Name("SenbeiDidRetrieveTasks")
    /// The activity stream arrived.
    public static let senbeiDidRetrieveActivities = Notification.Name("SenbeiDidRetrieveActivities")
    /// The current contact search was answered (a superseded one never is).
    public static let senbeiDidFindContacts = Notification.Name("SenbeiDidFindContacts")
    /// A task was marked as done.
    public static let senbeiDidMarkTaskAsDone = Notification.Name("SenbeiDidMarkTaskAsDone")
    /// A task was created.
    public static let senbeiDidCreateTask = Notification.Name("SenbeiDidCreateTask")
    /// A contact was created.
    public static let senbeiDidCreateContact = Notification.Name("SenbeiDidCreateContact")
    /// A comment was posted.
    public static let senbeiDidPostComment = Notification.Name("SenbeiDidPostComment")
    /// A comment was deleted.
    public static let senbeiDidDeleteComment = Notification.Name("SenbeiDidDeleteComment")
    /// A contact was edited (merged with another writer's change, if any).
    public static let senbeiDidEditContact = Notification.Name("SenbeiDidEditContact")
    /// A contact was deleted.
    public static let senbeiDidDeleteContact = Notification.Name("SenbeiDidDeleteContact")
    /// The sign-in succeeded.
    public static let senbeiDidLogin = Notification.Name("SenbeiDidLogin")
    /// The server refused the user name or password, or ended the session (it
    /// refused to renew the token); queued Senbei work was cancelled.
    public static let senbeiDidFailLogin = Notification.Name("SenbeiDidFailLogin")
    /// An operation failed for another reason than bad credentials or cancellation.
    public static let senbeiDidFailWithError = Notification.Name("SenbeiDidFailWithError")
}

/// Where Senbei's notification names and userInfo keys are explained (see the table above).
public enum SenbeiNotification {
    /// Keys of the userInfo of Senbei's notifications.
    public enum UserInfoKey {
        /// What arrived or changed: a page, a record, a list of records, a profile.
        public static let payload = "payload"
        /// What it is about: the `EntityKind` of a list, the `Commentable` of
        /// comments, or the identifier of the record changed.
        public static let entity = "entity"
        /// The `DepotError`, on failures only.
        public static let error = "error"
        /// The failed operation's name (`senbeiDidFailWithError` only).
        public static let operation = "operation"
    }

    /// The "did retrieve" notification for a page of `kind`.
    public static func didRetrieve(_ kind: EntityKind) -> Notification.Name {
        switch kind {
        case .accounts: .senbeiDidRetrieveAccounts
        case .contacts: .senbeiDidRetrieveContacts
        case .leads: .senbeiDidRetrieveLeads
        case .opportunities: .senbeiDidRetrieveOpportunities
        case .campaigns: .senbeiDidRetrieveCampaigns
        }
    }

    /// Every name above, for observers that want them all.
    public static let allNames: [Notification.Name] = [
        .senbeiDidRetrieveAccounts, .senbeiDidRetrieveContacts, .senbeiDidRetrieveLeads,
        .senbeiDidRetrieveOpportunities, .senbeiDidRetrieveCampaigns, .senbeiDidRetrieveComments,
        .senbeiDidRetrieveTasks, .senbeiDidRetrieveActivities, .senbeiDidFindContacts,
        .senbeiDidMarkTaskAsDone, .senbeiDidCreateTask, .senbeiDidCreateContact,
        .senbeiDidPostComment, .senbeiDidDeleteComment, .senbeiDidEditContact, .senbeiDidDeleteContact, .senbeiDidLogin, .senbeiDidFailLogin,
        .senbeiDidFailWithError,
    ]
}
