using System;

namespace CoreAI.Runtime
{
    /// <summary>Per-call settings.</summary>
    internal sealed class CallOptions
    {
        /// <summary>This call's timeout (null: the client's default; Timeout.InfiniteTimeSpan: none).</summary>
        public TimeSpan? Timeout { get; set; }

        /// <summary>A call with this timeout.</summary>
        public static CallOptions WithTimeout(TimeSpan timeout)
        {
            return new CallOptions { Timeout = timeout };
        }
    }
}
