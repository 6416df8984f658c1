import Foundation

/// The queue at a link's narrowest hop (a router's buffer, a `tbf` qdisc):
/// servers put response bytes into it as fast as it has room, and the link
/// drains it in order at its bandwidth. A response that starts behind queued
/// bytes waits for all of them, whatever its priority.
struct Bottleneck {
    /// Bytes in the queue, in the order they entered.
    struct Segment {
        var bytes: Double
        /// Each sender's fraction of `bytes` (they sum to 1); empty for a head.
        var shares: [Int: Double]
        /// A response head (no bytes): it reaches the client when everything before it has.
        var head: Int?
    }

    /// How many bytes the queue holds at most; senders with more wait for room.
    let capacity: Double
    var segments: [Segment] = []
    var queued: Double = 0

    /// Everything queued is lost (the link went offline).
    mutating func clear() {
        segments.removeAll()
        queued = 0
    }

    /// Appends `amounts` (bytes per sender) as one segment, merged into the
    /// tail when the tail holds the same senders.
    mutating func append(_ amounts: [Int: Double]) {
        let total = amounts.values.reduce(0, +)
        guard total > 0 else { return }
        queued += total
        if var tail = segments.last, tail.head == nil, Set(tail.shares.keys) == Set(amounts.keys) {
            let merged = tail.bytes + total
            for (id, amount) in amounts { tail.shares[id] = ((tail.shares[id] ?? 0) * tail.bytes + amount) / merged }
            tail.bytes = merged
            segments[segments.count - 1] = tail
        } else {
            segments.append(Segment(bytes: total, shares: amounts.mapValues { $0 / total }))
        }
    }
}

/// The link with a bottleneck queue: the model's time steps when the link has
/// ``NetworkSimulator/Link/queue``.
extension LinkModel {
    /// Bytes per second the bottleneck drains.
    private var drainRate: Double { online ? link.bandwidth / 8 : 0 }

    /// Senders with bytes not yet in the queue, by transfer number.
    private var backlogged: [Int] {
        transfers.values.filter { $0.answering && $0.unsent > Self.epsilon }.map(\.id).sorted()
    }

    /// Servers whose request has arrived start answering (their head joins the
    /// tail), then the free room is shared equally among the senders.
    private mutating func fillQueue() {
        guard var queue = bottleneck else { return }
        for id in transfers.keys.sorted() {
            guard var transfer = transfers[id], transfer.stream == nil, !transfer.answering, case .head = transfer.phase, transfer.headAt <= time else { continue }
            transfer.answering = true
            transfers[id] = transfer
            queue.segments.append(.init(bytes: 0, shares: [:], head: id))
            version += 1
        }
        var senders = backlogged
        var room = queue.capacity - queue.queued
        while room > Self.epsilon, !senders.isEmpty {
            let part = room / Double(senders.count)
            var amounts: [Int: Double] = [:]
            var still: [Int] = []
            for id in senders {
                let amount = min(part, transfers[id]!.unsent)
                transfers[id]!.unsent -= amount
                amounts[id] = amount
                room -= amount
                if transfers[id]!.unsent > Self.epsilon { still.append(id) }
            }
            queue.append(amounts)
            version += 1
            if still.count == senders.count { break }
            senders = still
        }
        bottleneck = queue
    }

    /// Heads at the front of the queue reach their clients.
    private mutating func deliverHeads() {
        while let front = bottleneck?.segments.first, front.bytes <= Self.epsilon {
            bottleneck!.segments.removeFirst()
            bottleneck!.queued = max(0, bottleneck!.queued - front.bytes)
            credit(front, bytes: front.bytes)
            if let id = front.head, var transfer = transfers[id] {
                headArrived(&transfer)
                transfers[id] = transfer
            }
        }
    }

    /// Hands `bytes` of `segment` to its senders' transfers (bytes of ended transfers are lost).
    private mutating func credit(_ segment: Bottleneck.Segment, bytes: Double) {
        for (id, share) in segment.shares {
            guard var transfer = transfers[id] else { continue }
            transfer.received = min(Double(transfer.limit), transfer.received + bytes * share)
            transfers[id] = transfer
        }
    }

    /// The earliest time something changes in the queue: a server starts
    /// answering, the front segment drains, a consumer's chunk is complete, a
    /// sender has put its last byte in.
    func nextQueueEventTime() -> Duration? {
        var next: Duration?
        func consider(_ t: Duration) { next = min(next ?? t, t) }
        for transfer in transfers.values where !transfer.answering {
            if case .head = transfer.phase { consider(max(transfer.headAt, time)) }
        }
        let rate = drainRate
        guard let queue = bottleneck, rate > 0 else { return next }
        if let front = queue.segments.first {
            consider(time + Self.duration(seconds: front.bytes / rate))
            for (id, share) in front.shares where share > 0 {
                guard let transfer = transfers[id], case .body = transfer.phase else { continue }
                let target = min(transfer.limit, transfer.delivered + chunkSize)
                if Double(target) > transfer.received + Self.epsilon {
                    consider(time + Self.duration(seconds: (Double(target) - transfer.received) / (rate * share)))
                }
            }
        }
        let senders = backlogged
        if !senders.isEmpty {
            let each = rate / Double(senders.count)
            for id in senders { consider(time + Self.duration(seconds: transfers[id]!.unsent / each)) }
        }
        return next
    }

    /// Moves the queue to `target`: the link drains the front, and senders
    /// with bytes left refill what it drained, in equal parts.
    mutating func advanceQueue(to target: Duration) {
        repeat {
            fillQueue()
            deliverHeads()
            settleEvents()
            let step = min(target, nextEventTime() ?? target)
            if step > time {
                drain(for: (step - time).seconds)
                time = step
                version += 1
            }
            fillQueue()
            deliverHeads()
            settleEvents()
        } while time < target
    }

    private mutating func drain(for seconds: Double) {
        let rate = drainRate
        guard rate > 0, bottleneck != nil else { return }
        var left = rate * seconds
        var drained = 0.0
        while left > 0, let front = bottleneck!.segments.first, front.head == nil {
            let take = min(left, front.bytes)
            credit(front, bytes: take)
            left -= take
            drained += take
            bottleneck!.queued = max(0, bottleneck!.queued - take)
            if front.bytes - take <= Self.epsilon {
                bottleneck!.segments.removeFirst()
            } else {
                bottleneck!.segments[0].bytes -= take
            }
        }
        // What drained made room: the senders refill it in equal parts.
        let senders = backlogged
        guard !senders.isEmpty, drained > 0 else { return }
        var amounts: [Int: Double] = [:]
        for id in senders {
            let amount = min(drained / Double(senders.count), transfers[id]!.unsent)
            transfers[id]!.unsent -= amount
            amounts[id] = amount
        }
        bottleneck!.append(amounts)
    }
}
