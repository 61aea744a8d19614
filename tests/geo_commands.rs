//! Geo commands: scores are Redis' 52-bit geohashes (checked by hand for the origin), the
//! Sicily examples of Redis' documentation answer as published, bad input gets Redis'
//! error texts and writes nothing, and every write is one batch. Ordering, ties, edges and
//! every option combination are compared with redis-server by the differential test
//! (`gen_geo.rs`).

mod common;

use common::*;
use rediskv::{Db, Reply};
use rediskv::{FaultyBackend, MemoryBackend};

fn sicily() -> Db<'static, MemoryBackend> {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "GEOADD Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania"), int(2));
    db
}

fn arr(items: Vec<Reply>) -> Reply {
    Reply::Array(items)
}

#[test]
fn the_origin_hashes_to_the_middle_of_both_ranges() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "GEOADD g 0 0 o"), int(1));
    // Both offsets are exactly half of 2^26: bit 25 of the latitude lands on bit 50 and
    // bit 25 of the longitude on bit 51.
    assert_eq!(run(&mut db, "ZSCORE g o"), bulk(&((1u64 << 50) + (1u64 << 51)).to_string()));
    // The cell centre: latitude 170.10225756 / 2^27, longitude 360 / 2^27 = 45 / 2^24.
    assert_eq!(run(&mut db, "GEOPOS g o"), arr(vec![bulks(&["0.00000268220901489", "0.00000126736058093"])]));
    // Re-encoded over ±90: binary 11 then zeros, so 's' (24) and then '0's.
    assert_eq!(run(&mut db, "GEOHASH g o"), bulks(&["s0000000000"]));
    assert_eq!(run(&mut db, "GEODIST g o o"), bulk("0.0000"));
}

#[test]
fn the_documented_sicily_examples() {
    let mut db = sicily();
    assert_eq!(run(&mut db, "ZSCORE Sicily Palermo"), bulk("3479099956230698"));
    assert_eq!(run(&mut db, "GEODIST Sicily Palermo Catania"), bulk("166274.1516"));
    assert_eq!(run(&mut db, "GEODIST Sicily Palermo Catania km"), bulk("166.2742"));
    assert_eq!(run(&mut db, "GEODIST Sicily Palermo Catania MI"), bulk("103.3182"));
    assert_eq!(run(&mut db, "GEODIST Sicily Palermo Nowhere"), Reply::Nil);
    assert_eq!(run(&mut db, "GEODIST Nokey a b"), Reply::Nil);
    assert_eq!(run(&mut db, "GEOHASH Sicily Palermo Catania Nowhere"), {
        arr(vec![bulk("sqc8b49rny0"), bulk("sqdtr74hyu0"), Reply::Nil])
    });
    assert_eq!(
        run(&mut db, "GEOPOS Sicily Palermo Nowhere"),
        arr(vec![bulks(&["13.36138933897018433", "38.11555639549629859"]), Reply::NilArray])
    );
    // Unsorted: in the order of the boxes scanned.
    assert_eq!(
        run(&mut db, "GEORADIUS Sicily 15 37 200 km WITHDIST"),
        arr(vec![bulks(&["Palermo", "190.4424"]), bulks(&["Catania", "56.4413"])])
    );
    assert_eq!(run(&mut db, "GEORADIUS Sicily 15 37 100 km"), bulks(&["Catania"]));
    assert_eq!(
        run(&mut db, "GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 400 400 km ASC WITHCOORD WITHDIST"),
        arr(vec![
            arr(vec![
                bulk("Catania"),
                bulk("56.4413"),
                bulks(&["15.08726745843887329", "37.50266842333162032"])
            ]),
            arr(vec![
                bulk("Palermo"),
                bulk("190.4424"),
                bulks(&["13.36138933897018433", "38.11555639549629859"])
            ]),
        ])
    );
    assert_eq!(
        run(&mut db, "GEORADIUSBYMEMBER Sicily Palermo 200 km DESC COUNT 1 WITHHASH"),
        arr(vec![arr(vec![bulk("Catania"), int(3479447370796909)])])
    );
    assert_eq!(run(&mut db, "GEOSEARCH Sicily FROMMEMBER Catania BYRADIUS 0 m"), bulks(&["Catania"]));
}

#[test]
fn geoadd_options_are_zadd_options() {
    let mut db = sicily();
    assert_eq!(run(&mut db, "GEOADD Sicily NX 0 0 Palermo 1 1 New"), int(1));
    assert_eq!(
        run(&mut db, "GEOPOS Sicily Palermo"),
        arr(vec![bulks(&["13.36138933897018433", "38.11555639549629859"])])
    );
    assert_eq!(run(&mut db, "GEOADD Sicily XX CH 0 0 Palermo 2 2 Other"), int(1));
    assert_eq!(run(&mut db, "ZCARD Sicily"), int(3));
    assert_eq!(run(&mut db, "GEOADD Sicily CH 0 0 Palermo"), int(0));
    assert_eq!(run(&mut db, "GEOADD Missing XX 0 0 a"), int(0));
    assert_eq!(run(&mut db, "EXISTS Missing"), int(0));
}

#[test]
fn stores_write_scores_or_distances_as_one_batch() {
    let mut db = Db::new(FaultyBackend::new(MemoryBackend::new()));
    db.run(&["GEOADD", "Sicily", "13.361389", "38.115556", "Palermo", "15.087269", "37.502669", "Catania"]);
    assert_eq!(db.backend().writes(), 1);
    let stored = db.run(&[
        "GEOSEARCHSTORE",
        "near",
        "Sicily",
        "FROMLONLAT",
        "15",
        "37",
        "BYRADIUS",
        "200",
        "km",
        "ASC",
    ]);
    assert_eq!(stored, int(2));
    assert_eq!(db.backend().writes(), 2);
    assert_eq!(
        db.run(&["ZRANGE", "near", "0", "-1", "WITHSCORES"]),
        Reply::Pairs(vec![
            (Reply::bulk(b"Palermo"), Reply::Double(3479099956230698.0)),
            (Reply::bulk(b"Catania"), Reply::Double(3479447370796909.0)),
        ])
    );
    let args = ["GEORADIUS", "Sicily", "15", "37", "200", "km", "COUNT", "1", "STOREDIST", "d"];
    assert_eq!(db.run(&args), int(1));
    assert_eq!(db.backend().writes(), 3);
    assert_eq!(db.run(&["ZRANGE", "d", "0", "-1"]), bulks(&["Catania"]));
    // Nothing found: the destination is deleted.
    assert_eq!(db.run(&["GEORADIUS", "Sicily", "0", "0", "1", "m", "STORE", "d"]), int(0));
    assert_eq!(db.run(&["EXISTS", "d"]), int(0));
    assert_eq!(db.run(&["GEORADIUS", "Nokey", "0", "0", "1", "m", "STORE", "near"]), int(0));
    assert_eq!(db.run(&["EXISTS", "near"]), int(0));
}

#[test]
fn bad_input_gets_redis_errors_and_writes_nothing() {
    let mut db = sicily();
    run(&mut db, "SET str x");
    let before = db.backend().clone();
    let cases = [
        ("GEOADD Sicily 181 0 x", "ERR invalid longitude,latitude pair 181.000000,0.000000"),
        ("GEOADD Sicily 0 85.06 x", "ERR invalid longitude,latitude pair 0.000000,85.060000"),
        ("GEOADD Sicily 1 1 ok 0 -90 x", "ERR invalid longitude,latitude pair 0.000000,-90.000000"),
        ("GEOADD Sicily x 0 a", "ERR value is not a valid float"),
        ("GEOADD Sicily NX XX 0 0 a", "ERR syntax error"),
        ("GEOADD Sicily 0 0 a 1", "ERR syntax error"),
        ("GEOADD Sicily CH CH CH", "ERR syntax error"),
        ("GEOADD str 0 0 a", "WRONGTYPE Operation against a key holding the wrong kind of value"),
        ("GEODIST Sicily a b cm", "ERR unsupported unit provided. please use M, KM, FT, MI"),
        ("GEODIST Sicily a b km km", "ERR syntax error"),
        ("GEODIST str a b", "WRONGTYPE Operation against a key holding the wrong kind of value"),
        ("GEORADIUS Sicily 15 37 -1 km", "ERR radius cannot be negative"),
        ("GEORADIUS Sicily 15 37 x km", "ERR need numeric radius"),
        ("GEORADIUS_RO Sicily 15 37 1 km STORE k", "ERR syntax error"),
        ("GEORADIUS Sicily 15 37 1 km STORE k WITHDIST", {
            "ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        }),
        ("GEORADIUS Sicily 15 37 1 km ANY", "ERR the ANY argument requires COUNT argument"),
        ("GEORADIUS Sicily 15 37 1 km COUNT 0", "ERR COUNT must be > 0"),
        ("GEORADIUSBYMEMBER Sicily Nowhere 1 km", "ERR could not decode requested zset member"),
        ("GEOSEARCH Sicily FROMMEMBER Nowhere BYRADIUS 1 km", "ERR could not decode requested zset member"),
        (
            "GEOSEARCH Sicily BYRADIUS 1 km ASC WITHDIST",
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for GEOSEARCH",
        ),
        ("geosearch Sicily FROMLONLAT 0 0 ASC WITHDIST", {
            "ERR exactly one of BYRADIUS and BYBOX can be specified for geosearch"
        }),
        ("GEOSEARCH Sicily FROMLONLAT 0 0 FROMMEMBER Palermo BYRADIUS 1 m", "ERR syntax error"),
        ("GEOSEARCH Sicily FROMLONLAT 0 0 BYBOX 1 -1 m", "ERR height or width cannot be negative"),
        ("GEOSEARCH Sicily FROMLONLAT 0 0 BYBOX 1 x m", "ERR need numeric height"),
        ("GEOSEARCH Sicily FROMLONLAT 0 0 BYRADIUS 1 m STOREDIST", "ERR syntax error"),
        ("GEOSEARCHSTORE d Sicily FROMLONLAT 0 0 BYRADIUS 1 m WITHDIST", {
            "ERR GEOSEARCHSTORE is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        }),
        (
            "GEOSEARCH str FROMLONLAT 0 0 BYRADIUS 1 m",
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ),
    ];
    for (line, want) in cases {
        assert_eq!(run(&mut db, line), err(want), "{line}");
        assert!(*db.backend() == before, "{line} wrote");
    }
    // A missing key answers before its member or radius is looked at.
    assert_eq!(run(&mut db, "GEORADIUSBYMEMBER Nokey Nowhere -1 cm"), arr(vec![]));
    assert_eq!(run(&mut db, "GEOSEARCH Nokey FROMMEMBER Nowhere BYRADIUS 1 km"), arr(vec![]));
}

#[test]
fn edges_of_the_world_are_valid_points() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "GEOADD w 180 85.05112878 ne -180 -85.05112878 sw"), int(2));
    // The top edge sets bit 26 of both offsets: the scores pass 52 bits.
    assert_eq!(run(&mut db, "ZSCORE w ne"), bulk(&((1u64 << 53) + (1u64 << 52)).to_string()));
    assert_eq!(run(&mut db, "ZSCORE w sw"), bulk("0"));
    assert_eq!(run(&mut db, "GEOPOS w ne"), arr(vec![bulks(&["180", "85.0511287799999991"])]));
    // As in Redis, the search boxes do not wrap around the antimeridian: a point 1.1 km
    // west of it is not found from it.
    assert_eq!(run(&mut db, "GEOADD a 179.99 0 east -179.99 0 west"), int(2));
    assert_eq!(run(&mut db, "GEOSEARCH a FROMLONLAT 180 0 BYRADIUS 5 km ASC WITHDIST"), {
        arr(vec![bulks(&["east", "1.1125"])])
    });
}
