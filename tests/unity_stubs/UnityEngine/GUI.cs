namespace UnityEngine
{
    /// <summary>A 2D vector.</summary>
    public struct Vector2
    {
        /// <summary>X component.</summary>
        public float x;

        /// <summary>Y component.</summary>
        public float y;

        /// <summary>A vector with the given components.</summary>
        public Vector2(float x, float y)
        {
            this.x = x;
            this.y = y;
        }
    }

    /// <summary>A rectangle.</summary>
    public struct Rect
    {
        /// <summary>Creates a rectangle.</summary>
        public Rect(float x, float y, float width, float height)
        {
            this.x = x;
            this.y = y;
            this.width = width;
            this.height = height;
        }

        /// <summary>Left edge.</summary>
        public float x { get; set; }

        /// <summary>Top edge.</summary>
        public float y { get; set; }

        /// <summary>Width.</summary>
        public float width { get; set; }

        /// <summary>Height.</summary>
        public float height { get; set; }
    }

    /// <summary>Text, image and tooltip of a GUI element.</summary>
    public class GUIContent
    {
        /// <summary>The text.</summary>
        public string text { get; set; }

        /// <summary>Content with text.</summary>
        public GUIContent(string text)
        {
            this.text = text;
        }
    }

    /// <summary>Styling of a GUI element.</summary>
    public sealed class GUIStyle
    {
        /// <summary>Word wrapping of the text.</summary>
        public bool wordWrap { get; set; }
    }

    /// <summary>A layout option of GUILayout.</summary>
    public sealed class GUILayoutOption
    {
        internal GUILayoutOption()
        {
        }
    }

    /// <summary>Immediate-mode GUI state.</summary>
    public class GUI
    {
        /// <summary>Whether GUI elements accept input.</summary>
        public static bool enabled { get; set; } = true;
    }

    /// <summary>Automatic-layout immediate-mode GUI (stub: controls return their inputs).</summary>
    public class GUILayout
    {
        /// <summary>A label.</summary>
        public static void Label(string text, params GUILayoutOption[] options)
        {
        }

        /// <summary>A button; true when clicked (stub: once after StubGUI.Click(text)).</summary>
        public static bool Button(string text, params GUILayoutOption[] options)
        {
            StubEngine.ThrowIfNotMainThread("Button");
            return StubGUI.TakeClick(text);
        }

        /// <summary>A single-line text field; returns the edited text.</summary>
        public static string TextField(string text, params GUILayoutOption[] options)
        {
            return text;
        }

        /// <summary>A toolbar; returns the selected index.</summary>
        public static int Toolbar(int selected, string[] texts, params GUILayoutOption[] options)
        {
            return selected;
        }


        /// <summary>Starts a GUILayout block in a fixed screen area.</summary>
        public static void BeginArea(Rect screenRect)
        {
        }

        /// <summary>Closes a GUILayout block started with BeginArea.</summary>
        public static void EndArea()
        {
        }

        /// <summary>A fixed width option.</summary>
        public static GUILayoutOption Width(float width)
        {
            return new GUILayoutOption();
        }


        /// <summary>A minimum height option.</summary>
        public static GUILayoutOption MinHeight(float minHeight)
        {
            return new GUILayoutOption();
        }

        /// <summary>Whether the element may expand vertically.</summary>
        public static GUILayoutOption ExpandHeight(bool expand)
        {
            return new GUILayoutOption();
        }
    }

    /// <summary>Stub only: clicks for GUILayout.Button (engine state). Not part of Unity's API.</summary>
    [StubEngineState]
    public static class StubGUI
    {
        private static readonly System.Collections.Generic.List<string> Pending = new System.Collections.Generic.List<string>();

        /// <summary>The next GUILayout.Button labelled `text` returns true (once).</summary>
        public static void Click(string text)
        {
            lock (Pending) Pending.Add(text);
        }

        internal static bool TakeClick(string text)
        {
            lock (Pending) return Pending.Remove(text);
        }
    }
}
