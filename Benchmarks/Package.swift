// swift-tools-version:6.2
// Benchmarks live in their own package so the main test run never builds them.
// Run: swift run -c release --package-path Benchmarks depot-bench transport
import PackageDescription

let package = Package(
    name: "DepotBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "Depot", path: ".."),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/ordo-one/malloc-interposer", from: "1.6.1"),
    ],
    targets: [
        .executableTarget(
            name: "depot-bench",
            dependencies: [
                .product(name: "Depot", package: "Depot"),
                .product(name: "DepotAsyncHTTPClient", package: "Depot"),
                .product(name: "DepotStore", package: "Depot"),
                .product(name: "DepotTesting", package: "Depot"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "MallocInterposerSwift", package: "malloc-interposer"),
            ]
        ),
    ]
)
