/// A field of an item that several elements can fill, such as the date (RSS's
/// `pubDate`, Atom 0.3's `issued` or `created`, Dublin Core's `dc:date`): the
/// best-ranked element the item holds wins, in whatever order the feed writes
/// them; of elements of the same rank, the first.
///
/// Rank 0 is the best: the feed format's own element. An element with nothing
/// usable (empty, an unreadable date) is offered as `nil` and counts as absent.
///
/// For example:
///
/// ```swift
/// var published = RankedField<Date>()
/// published.offer(FeedDate.parse("2003-06-01"), rank: 2)                     // dc:date
/// published.offer(FeedDate.parse("Tue, 10 Jun 2003 04:00:00 GMT"), rank: 0)  // pubDate, after it
/// published.value                                                           // 10 June: pubDate's
/// ```
struct RankedField<Value> {
    /// The value of the best-ranked element offered so far, if any.
    private(set) var value: Value?
    private var rank = Int.max

    /// Takes `candidate` if there is one and it ranks better than the value held.
    mutating func offer(_ candidate: Value?, rank: Int) {
        guard let candidate, rank < self.rank else { return }
        value = candidate
        self.rank = rank
    }
}
