package rollback

import "strconv"

func fmt2(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) }

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
