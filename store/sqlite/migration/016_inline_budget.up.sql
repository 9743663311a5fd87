-- superstep schema version 16: no table changes. A checkpoint manifest may
-- now hold a part of up to 640 bytes inline (256 before), which a build of
-- version 15 or older would report as a corrupt manifest. The version is
-- bumped so that such a build refuses this database at Open instead.
SELECT 1;
