// swift-tools-version:6.2
import PackageDescription

/// What a package that uses Depot depends on: the four library products, and
/// GRDB for the store's records. The documentation and name-clash tests build
/// against exactly this.
let libraryProducts: [Target.Dependency] = [
    "Depot",
    "DepotStore",
    "DepotTesting",
    "DepotAsyncHTTPClient",
    .product(name: "GRDB", package: "GRDB.swift"),
]

let package = Package(
    name: "Depot",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    // The library only. The example apps, their kits and the demo server are
    // internal targets; SwiftPM still gives this package's executable targets
    // products of their own, so `swift run nerdfeed` works from the root.
    products: [
        .library(name: "Depot", targets: ["Depot"]),
        .library(name: "DepotStore", targets: ["DepotStore"]),
        .library(name: "DepotAsyncHTTPClient", targets: ["DepotAsyncHTTPClient"]),
        .library(name: "DepotTesting", targets: ["DepotTesting"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        // Test-only: certificates made in the TLS tests.
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.4"),
        // Documentation only: `swift package generate-documentation` (the
        // README's Installation section gives the command for all four catalogs).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        .target(
            name: "Depot",
            dependencies: [
                "Seeded",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Instrumentation", package: "swift-distributed-tracing"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        .target(
            name: "DepotStore",
            dependencies: [
                "Depot",
                "Seeded",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]
        ),
        .target(
            name: "DepotAsyncHTTPClient",
            dependencies: [
                "Depot",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        .target(
            name: "DepotTesting",
            dependencies: [
                "Seeded",
                "Depot",
                "DepotStore",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // The package's one seeded generator (SplitMix64): retry jitter, the
        // demo server's data, DepotTesting. Internal, no dependencies.
        .target(name: "Seeded"),
        .target(
            name: "DemoServer",
            dependencies: [
                "Seeded",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Fixed-width text for the example apps (no dependencies). Internal.
        .target(name: "TextLayout"),
        // The example apps' English sync-status line. Internal: UI text is the app's.
        .target(name: "SyncStatusText", dependencies: ["Depot", "DepotStore"]),
        // libxml2, which Nerdfeed's feed reader drives directly (its SAX2 push
        // parser): FoundationXML's XMLParser leaks every error message and
        // costs several times libxml2's own time. Linux: Debian's libxml2-dev.
        .systemLibrary(
            name: "CLibXML2",
            pkgConfig: "libxml-2.0",
            providers: [.apt(["libxml2-dev"]), .brew(["libxml2"])]
        ),
        .target(
            name: "NerdfeedKit",
            dependencies: [
                "CLibXML2",
                "Depot",
                "DepotStore",
                "SyncStatusText",
                "TextLayout",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        .target(
            name: "TimelineKit",
            dependencies: [
                "Depot",
                "DepotStore",
                "SyncStatusText",
                "TextLayout",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        .target(
            name: "SenbeiKit",
            dependencies: [
                "Depot",
                "DepotStore",
                "SyncStatusText",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        .executableTarget(
            name: "depot-server",
            dependencies: [
                "DemoServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // What the example apps' command lines share (the terminal, the cache
        // path, the transport). Internal: not a product.
        .target(
            name: "ExampleSupport",
            dependencies: [
                "Depot",
                "DepotStore",
                "SyncStatusText",
                "TextLayout",
                "DepotAsyncHTTPClient",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "nerdfeed",
            dependencies: [
                "SyncStatusText",
                "Depot",
                "DepotStore",
                "DemoServer",
                "NerdfeedKit",
                "ExampleSupport",
                "TextLayout",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "senbei",
            dependencies: [
                "SyncStatusText",
                "Depot",
                "DepotStore",
                "DemoServer",
                "SenbeiKit",
                "ExampleSupport",
                "TextLayout",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(
            name: "DepotTests",
            dependencies: [
                "Seeded",
                "CLITestSupport",
                "Depot",
                "DepotAsyncHTTPClient",
                "DemoServer",
                "DepotTesting",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ]
        ),
        // TLS through both transports, against a listener whose certificates the
        // tests make; the only target that needs swift-certificates and swift-crypto.
        .testTarget(
            name: "DepotTLSTests",
            dependencies: [
                "Depot",
                "DepotAsyncHTTPClient",
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]
        ),
        .testTarget(
            name: "DepotStoreTests",
            dependencies: [
                "Seeded",
                "CLITestSupport",
                "Depot",
                "DepotStore",
                "DepotTesting",
                "DepotAsyncHTTPClient",
                "DemoServer",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ],
            resources: [.copy("Fixtures")]
        ),
        .executableTarget(
            name: "timeline",
            dependencies: [
                "SyncStatusText",
                "Depot",
                "DepotStore",
                "DemoServer",
                "TimelineKit",
                "ExampleSupport",
                "TextLayout",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // Fuzzing (Fuzz/README.md): one function per fuzz target, and the
        // driver that runs them under libFuzzer (`Fuzz/run`) or replays saved
        // inputs. In the root package, to reach `package` symbols.
        .target(
            name: "FuzzTargets",
            dependencies: [
                "Depot", "DepotStore", "NerdfeedKit", "Seeded",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Fuzz/Targets"
        ),
        .executableTarget(
            name: "depot-fuzz",
            dependencies: ["FuzzTargets"],
            path: "Fuzz/Driver"
        ),
        // Allocations per operation, counted in a process of their own (its
        // malloc family counts), for the thresholds `AllocationTests` checks.
        .target(
            name: "CMallocCounter",
            path: "Tests/CMallocCounter"
        ),
        .executableTarget(
            name: "depot-allocations",
            dependencies: [
                "CMallocCounter",
                "Depot",
                "DepotStore",
                "DepotAsyncHTTPClient",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Tests/AllocationCounter"
        ),
        // One of the processes that share a store's outbox in `OutboxClaimsTests`:
        // it queues tasks, or drains them to depot-server, saying what it sends.
        .executableTarget(
            name: "depot-outbox-sender",
            dependencies: [
                "Depot",
                "DepotStore",
                "DepotAsyncHTTPClient",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Tests/OutboxSender"
        ),
        // Running the example executables from tests: posix_spawn and tmux.
        .target(
            name: "CLITestSupport",
            dependencies: ["CSpawnSupport"],
            path: "Tests/CLITestSupport"
        ),
        // The GNU extensions Swift's Glibc module leaves out: pipe2, closefrom.
        .target(
            name: "CSpawnSupport",
            path: "Tests/CSpawnSupport"
        ),
        .testTarget(
            name: "NerdfeedTests",
            dependencies: [
                "CLITestSupport",
                "NerdfeedKit",
                "Depot",
                "DepotStore",
                "DepotTesting",
                "DemoServer",
                "DepotAsyncHTTPClient",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            resources: [.copy("Fixtures")]
        ),
        .testTarget(
            name: "TimelineTests",
            dependencies: [
                "CLITestSupport",
                "TimelineKit",
                "ExampleSupport",
                "TextLayout",
                "Depot",
                "DepotStore",
                "DepotTesting",
                "DemoServer",
                "DepotAsyncHTTPClient",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        .testTarget(
            name: "SenbeiTests",
            dependencies: [
                "CLITestSupport",
                "SenbeiKit",
                "Depot",
                "DepotStore",
                "DepotTesting",
                "DemoServer",
                "DepotAsyncHTTPClient",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // The three example apps run against storage problems made real
        // (a full tmpfs, modes, a held lock, a newer schema): what they say.
        .testTarget(
            name: "ExampleCLITests",
            dependencies: [
                "CLITestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // The README's and the DocC articles' code examples, compiled, checked
        // against the docs' text, and run where they need no network.
        .testTarget(
            name: "DocumentationTests",
            dependencies: libraryProducts + [
                // The observability article's example: a backend's factory and tracer.
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ]
        ),
        // Compile-only: Depot's public names beside the packages users import with it.
        .testTarget(
            name: "NameClashTests",
            dependencies: libraryProducts + [
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        // Every committed corpus and crash input, and a short `Fuzz/run --smoke`.
        .testTarget(
            name: "FuzzTests",
            dependencies: ["FuzzTargets", "CLITestSupport", "Depot", "NerdfeedKit"]
        ),
        .testTarget(
            name: "DemoServerTests",
            dependencies: [
                "DemoServer",
                "DepotTesting",
                "CLITestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
    ]
)
