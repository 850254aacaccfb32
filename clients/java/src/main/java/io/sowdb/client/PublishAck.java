package io.sowdb.client;

/**
 * What a publish stored: the number of messages acknowledged and the bookmarks of the first and
 * last (0 when none got one), and how many of them were acknowledged as J-4 duplicates (applied by
 * an earlier send of the same producer id and sequence: no new bookmark).
 */
public record PublishAck(long count, long firstBookmark, long lastBookmark, long duplicates) {}
