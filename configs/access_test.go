package configs

import (
	"testing"
	"time"
)

// A window covers its start, not its end; one past midnight counts for the day it began.
func TestWindowCovers(t *testing.T) {
	mon := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC) // a Monday
	at := func(day int, hm string) time.Time {
		c, _ := time.Parse("15:04", hm)
		return mon.AddDate(0, 0, day).Add(time.Duration(c.Hour())*time.Hour + time.Duration(c.Minute())*time.Minute)
	}
	monday := []time.Weekday{time.Monday}
	for _, tc := range []struct {
		name  string
		hours string
		days  []time.Weekday
		t     time.Time
		want  bool
	}{
		{"the start is in", "08:00-18:00", nil, at(0, "08:00"), true},
		{"the end is out", "08:00-18:00", nil, at(0, "18:00"), false},
		{"before the start is out", "08:00-18:00", nil, at(0, "07:59"), false},
		{"a day not listed is out", "08:00-18:00", monday, at(1, "09:00"), false},
		{"all day on a listed day", "", monday, at(0, "23:59"), true},
		{"all day, every day", "", nil, at(3, "03:00"), true},
		{"past midnight: late on the day it starts", "22:00-06:00", monday, at(0, "23:00"), true},
		{"past midnight: the next morning counts for the day before", "22:00-06:00", monday, at(1, "05:59"), true},
		{"past midnight: the morning of the listed day belongs to the day before", "22:00-06:00", monday, at(0, "03:00"), false},
		{"past midnight: late on the next day is out", "22:00-06:00", monday, at(1, "23:00"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := ParseHours(tc.hours)
			if err != nil {
				t.Fatal(err)
			}
			if got := w.Covers(tc.t, tc.days); got != tc.want {
				t.Fatalf("%q on %s: %v, want %v", tc.hours, tc.t.Format("Mon 15:04"), got, tc.want)
			}
		})
	}
}
